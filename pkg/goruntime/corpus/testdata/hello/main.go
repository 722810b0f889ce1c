// Hello prints a greeting: the smallest program an agent sends.
package main

import "fmt"

func main() {
	fmt.Println("Hello, sandbox!")
}
