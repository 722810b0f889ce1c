// Reads configuration from environment variables the request sets.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	greeting, ok := os.LookupEnv("CORPUS_GREETING")
	fmt.Printf("CORPUS_GREETING=%q set=%v\n", greeting, ok)
	_, ok = os.LookupEnv("CORPUS_SURELY_UNSET")
	fmt.Println("CORPUS_SURELY_UNSET set:", ok)
	n, err := strconv.Atoi(os.Getenv("CORPUS_RETRIES"))
	fmt.Println("retries:", n, err)
	d, err := time.ParseDuration(os.Getenv("CORPUS_TIMEOUT"))
	fmt.Println("timeout:", d, err)
	fmt.Println("expanded:", os.ExpandEnv("${CORPUS_GREETING}, world ($CORPUS_RETRIES tries)"))
	fmt.Println("HOME set:", os.Getenv("HOME") != "")
}
