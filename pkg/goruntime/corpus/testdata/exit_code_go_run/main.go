// Exits 3 after printing to both streams. Under go run the go command
// reports "exit status 3" and itself exits 1.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("checking configuration")
	fmt.Fprintln(os.Stderr, "config: missing key \"port\"")
	os.Exit(3)
}
