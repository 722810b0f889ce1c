// Exits 3; built first and run directly, so the shell sees the exact code.
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
