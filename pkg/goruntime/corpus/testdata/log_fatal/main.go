// log.Fatalf writes to stderr and exits 1 without running defers.
package main

import (
	"fmt"
	"log"
	"os"
	"strconv"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("app: ")
	defer fmt.Println("never printed")
	port := os.Getenv("CORPUS_PORT_UNSET")
	fmt.Println("parsing port")
	if _, err := strconv.Atoi(port); err != nil {
		log.Fatalf("bad port %q: %v", port, err)
	}
}
