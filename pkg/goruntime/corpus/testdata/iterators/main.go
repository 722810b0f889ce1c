// Range-over-func iterators (iter.Seq), maps and slices helpers, range
// over an integer.
package main

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

func Fib() iter.Seq[int] {
	return func(yield func(int) bool) {
		a, b := 0, 1
		for {
			if !yield(a) {
				return
			}
			a, b = b, a+b
		}
	}
}

func Take[T any](seq iter.Seq[T], n int) iter.Seq[T] {
	return func(yield func(T) bool) {
		if n <= 0 {
			return
		}
		i := 0
		for v := range seq {
			if !yield(v) {
				return
			}
			i++
			if i == n {
				return
			}
		}
	}
}

func Enumerate[T any](s []T) iter.Seq2[int, T] {
	return func(yield func(int, T) bool) {
		for i, v := range s {
			if !yield(i, v) {
				return
			}
		}
	}
}

func main() {
	fmt.Println(slices.Collect(Take(Fib(), 12)))
	for i, w := range Enumerate(strings.Fields("range over func")) {
		fmt.Println(i, w)
	}
	m := map[string]int{"c": 3, "a": 1, "b": 2}
	fmt.Println(slices.Sorted(maps.Keys(m)))
	for i := range 3 {
		fmt.Print(i)
	}
	fmt.Println()
	for line := range strings.Lines("one\ntwo\nthree") {
		fmt.Printf("%q ", line)
	}
	fmt.Println()
}
