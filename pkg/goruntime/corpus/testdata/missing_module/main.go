// Imports a module that is not in go.mod and cannot be fetched offline.
package main

import (
	"fmt"

	"github.com/corpus-example/doesnotexist/v2/widget"
)

func main() {
	fmt.Println(widget.New())
}
