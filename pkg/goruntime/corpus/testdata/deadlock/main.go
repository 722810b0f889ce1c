// Every goroutine blocks: the runtime reports a deadlock.
package main

import "fmt"

func main() {
	ch := make(chan int)
	results := make(chan int)
	go func() {
		for v := range ch {
			results <- v * 2
		}
	}()
	ch <- 1
	fmt.Println(<-results)
	ch <- 2
	ch <- 3 // the worker is blocked sending 4 on results: nobody receives
	fmt.Println(<-results)
}
