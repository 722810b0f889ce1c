// Prints its command-line arguments and parses flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	fmt.Println("argc:", len(os.Args))
	// os.Args[0] is a temporary build path under go run: print only its base
	// shape, not the path.
	fmt.Println("argv0 is absolute:", filepath.IsAbs(os.Args[0]))
	n := flag.Int("n", 1, "repeat count")
	sep := flag.String("sep", ",", "separator")
	flag.Parse()
	for i, a := range os.Args[1:] {
		fmt.Printf("arg[%d] = %q\n", i+1, a)
	}
	for i := 0; i < *n; i++ {
		fmt.Println(strings.Join(flag.Args(), *sep))
	}
}
