// Off-by-one: runtime error: index out of range.
package main

import "fmt"

func last(xs []string) string {
	return xs[len(xs)]
}

func main() {
	names := []string{"ada", "grace", "linus"}
	for i := range names {
		fmt.Println(i, names[i])
	}
	fmt.Println("last:", last(names))
}
