// Builds fail on an unused import and an unused variable.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	unused := 42
	fmt.Println(strings.ToUpper("never built"))
}
