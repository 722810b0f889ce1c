// Two goroutines increment a shared counter without synchronisation. The
// race detector reports it and exits 66; the final value is not printed
// because it varies.
package main

import (
	"fmt"
	"sync"
)

func main() {
	counter := 0
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				counter++
			}
		}()
	}
	wg.Wait()
	fmt.Println("counter is positive:", counter > 0)
}
