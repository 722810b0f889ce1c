// Unbounded recursion. The maximum stack is lowered to 8 MiB so the crash
// comes quickly and does not depend on the sandbox's memory limit.
package main

import (
	"fmt"
	"runtime/debug"
)

func depth(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	return depth(n+1) + int(pad[0])
}

func main() {
	debug.SetMaxStack(8 << 20)
	fmt.Println("recursing")
	fmt.Println(depth(0))
}
