// Panics with a custom error from a nested call after a deferred print.
package main

import (
	"errors"
	"fmt"
)

var errCorrupt = errors.New("ledger is corrupt")

func balance(entries []int) int {
	total := 0
	for i, e := range entries {
		if e < 0 && total+e < 0 {
			panic(fmt.Errorf("entry %d overdraws the account: %w", i, errCorrupt))
		}
		total += e
	}
	return total
}

func main() {
	defer fmt.Println("deferred: runs before the panic is reported")
	fmt.Println("balance:", balance([]int{10, 20, -5}))
	fmt.Println("balance:", balance([]int{10, -50}))
}
