// Nil pointer dereference (SIGSEGV turned into a runtime panic).
package main

import "fmt"

type node struct {
	val  int
	next *node
}

func main() {
	list := &node{1, &node{2, nil}}
	for n := list; ; n = n.next {
		fmt.Println(n.val)
	}
}
