// A panic in a binary run directly exits 2.
package main

import "fmt"

type state struct{ name string }

func main() {
	fmt.Println("starting")
	var m map[string]*state
	m = map[string]*state{"a": {"alpha"}}
	fmt.Println(m["a"].name)
	panic("unreachable state: " + m["a"].name)
}
