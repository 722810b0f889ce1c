// Compiles, but go vet finds a bad format verb, an unreachable Printf
// argument count, and a lock copied by value.
package main

import (
	"fmt"
	"sync"
)

type counter struct {
	mu sync.Mutex
	n  int
}

func show(c counter) { fmt.Println(c.n) }

func main() {
	name := "gopher"
	fmt.Printf("hello %d\n", name)
	fmt.Printf("%s and %s\n", name)
	var c counter
	show(c)
}
