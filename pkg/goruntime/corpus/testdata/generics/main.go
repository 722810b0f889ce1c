// Generic functions, constraints and a generic type.
package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

type Number interface {
	~int | ~int64 | ~float64
}

func Sum[T Number](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

func Map[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func Filter[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// Stack is a LIFO of any element type.
type Stack[T any] struct{ items []T }

func (s *Stack[T]) Push(v T) { s.items = append(s.items, v) }

func (s *Stack[T]) Pop() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	v := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return v, true
}

type Pair[K cmp.Ordered, V any] struct {
	Key K
	Val V
}

func SortedPairs[K cmp.Ordered, V any](m map[K]V) []Pair[K, V] {
	ps := make([]Pair[K, V], 0, len(m))
	for k, v := range m {
		ps = append(ps, Pair[K, V]{k, v})
	}
	slices.SortFunc(ps, func(a, b Pair[K, V]) int { return cmp.Compare(a.Key, b.Key) })
	return ps
}

type Celsius float64

func main() {
	fmt.Println(Sum([]int{1, 2, 3, 4}))
	fmt.Println(Sum([]float64{1.5, 2.25}))
	fmt.Println(Sum([]Celsius{20.5, 21}))
	words := []string{"go", "sandbox", "generic", "x"}
	fmt.Println(Map(words, strings.ToUpper))
	fmt.Println(Map(words, func(s string) int { return len(s) }))
	fmt.Println(Filter(words, func(s string) bool { return len(s) > 2 }))

	var st Stack[string]
	st.Push("a")
	st.Push("b")
	for {
		v, ok := st.Pop()
		if !ok {
			break
		}
		fmt.Print(v, " ")
	}
	fmt.Println()
	for _, p := range SortedPairs(map[string]int{"z": 26, "a": 1, "m": 13}) {
		fmt.Printf("%s=%d ", p.Key, p.Val)
	}
	fmt.Println()
	fmt.Println(slices.Max([]int{3, 9, 2}), min(4, 2, 8), max("a", "b"))
}
