// A program that logs with file:line prefixes and fails. Its stderr looks
// like a compiler's ("main.go:21: ...") but the program built and ran: the
// outcome is a runtime error, not a build failure.
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
)

func load(path string) error {
	_, err := os.ReadFile(path)
	return err
}

func main() {
	log.SetFlags(log.Lshortfile)
	fmt.Println("loading settings")
	if err := load("settings.toml"); err != nil {
		log.Printf("load: %v", errors.Unwrap(err))
		log.Fatalf("cannot continue without settings")
	}
}
