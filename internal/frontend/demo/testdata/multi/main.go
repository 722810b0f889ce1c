package main

import (
	"fmt"

	"example.com/hello/greet"
)

func main() {
	for _, n := range []string{"Alice", "Bob", "Carol"} {
		fmt.Println(greet.Hello(n))
	}
}
