// Compiles, but go vet's printf check finds a wrong verb and a missing
// argument. (The findings come from one analyzer only: vet prints the
// findings of different analyzers in no fixed order.)
package main

import "fmt"

type counter struct {
	n int
}

func main() {
	name := "gopher"
	fmt.Printf("hello %d\n", name)
	fmt.Printf("%s and %s\n", name)
	c := counter{n: 2}
	fmt.Printf("count: %d %s\n", c.n)
}
