// A calculator that reads one expression per line, as an agent would feed
// an interactive program: "a op b".
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	r := bufio.NewReader(os.Stdin)
	n := 0
	for {
		var a, b float64
		var op string
		_, err := fmt.Fscanln(r, &a, &op, &b)
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			fmt.Printf("line %d: bad input: %v\n", n+1, err)
			r.ReadString('\n')
			n++
			continue
		}
		n++
		switch op {
		case "+":
			fmt.Printf("%g\n", a+b)
		case "-":
			fmt.Printf("%g\n", a-b)
		case "*":
			fmt.Printf("%g\n", a*b)
		case "/":
			if b == 0 {
				fmt.Println("division by zero")
				continue
			}
			fmt.Printf("%.4f\n", a/b)
		default:
			fmt.Printf("unknown operator %q\n", op)
		}
	}
	fmt.Println("lines:", n)
}
