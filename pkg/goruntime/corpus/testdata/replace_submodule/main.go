// Uses example.com/mathx from ./mathx via replace.
package main

import (
	"fmt"

	"example.com/mathx"
)

func main() {
	pairs := [][2]int{{12, 18}, {7, 13}, {21, 6}, {0, 5}}
	for _, p := range pairs {
		fmt.Printf("gcd(%d,%d)=%d lcm=%d\n", p[0], p[1], mathx.GCD(p[0], p[1]), mathx.LCM(p[0], p[1]))
	}
}
