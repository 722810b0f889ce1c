package greet_test

import (
	"fmt"

	"example.com/example-test"
)

func ExampleHello() {
	fmt.Println(greet.Hello("Ada", "Grace"))
	fmt.Println(greet.Hello())
	// Output:
	// Hello, Ada and Grace!
	// Hello, nobody!
}

func ExampleHello_unordered() {
	for _, n := range []string{"x", "y"} {
		fmt.Println(greet.Hello(n))
	}
	// Unordered output:
	// Hello, y!
	// Hello, x!
}

func ExampleHello_wrong() {
	fmt.Println(greet.Hello("Linus"))
	// Output: Hello, Linus
}
