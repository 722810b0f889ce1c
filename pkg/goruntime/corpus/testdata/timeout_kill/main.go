// Prints, then never finishes: the request's timeout kills it. (It sleeps
// rather than spins so the corpus does not burn CPU; a busy loop is killed
// the same way.)
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Println("started")
	os.Stdout.Sync()
	time.Sleep(time.Hour)
	fmt.Println("never printed")
}
