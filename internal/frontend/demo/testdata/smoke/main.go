// The single-file smoke program: stdlib only.
package main

import (
	"fmt"
	"runtime"
)

func main() {
	sum := 0
	for i := 1; i <= 100; i++ {
		sum += i
	}
	fmt.Printf("sum(1..100)=%d\n", sum)
	fmt.Printf("go=%s os=%s arch=%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
