// Type errors an agent makes: wrong types, an undefined name, a missing
// return.
package main

import "fmt"

func half(n int) int {
	if n%2 == 0 {
		return n / 2
	}
}

func main() {
	var count int = "three"
	fmt.Println(half(count), totl)
}
