// Writes to stdout and stderr, unbuffered and interleaved, then exits 0.
package main

import (
	"fmt"
	"log"
	"os"
)

func main() {
	log.SetFlags(0)
	for i := 1; i <= 5; i++ {
		fmt.Printf("out %d\n", i)
		fmt.Fprintf(os.Stderr, "err %d\n", i)
	}
	log.Println("log goes to stderr")
	fmt.Print("no trailing newline on stdout")
	fmt.Fprint(os.Stderr, "no trailing newline on stderr")
}
