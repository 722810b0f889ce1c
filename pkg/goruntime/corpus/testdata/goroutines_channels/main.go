// A worker pool: jobs fan out over a channel to four goroutines, results
// fan back in and are printed in job order.
package main

import (
	"fmt"
	"sync"
)

type result struct {
	job, square int
	worker      int
}

func worker(id int, jobs <-chan int, results chan<- result, wg *sync.WaitGroup) {
	defer wg.Done()
	for j := range jobs {
		results <- result{job: j, square: j * j, worker: id}
	}
}

func main() {
	jobs := make(chan int)
	results := make(chan result, 4)
	var wg sync.WaitGroup
	for w := 1; w <= 4; w++ {
		wg.Add(1)
		go worker(w, jobs, results, &wg)
	}
	go func() {
		for j := 1; j <= 20; j++ {
			jobs <- j
		}
		close(jobs)
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	squares := make([]int, 21)
	workers := map[int]bool{}
	for r := range results {
		squares[r.job] = r.square
		workers[r.worker] = true
	}
	sum := 0
	for j := 1; j <= 20; j++ {
		fmt.Printf("%2d^2 = %3d\n", j, squares[j])
		sum += squares[j]
	}
	fmt.Println("sum:", sum)
	fmt.Println("workers used at least one:", len(workers) >= 1)

	// A pipeline with select and a done channel.
	done := make(chan struct{})
	gen := func() <-chan int {
		ch := make(chan int)
		go func() {
			defer close(ch)
			for i := 0; ; i++ {
				select {
				case ch <- i:
				case <-done:
					return
				}
			}
		}()
		return ch
	}
	src := gen()
	for i := 0; i < 5; i++ {
		fmt.Print(<-src, " ")
	}
	close(done)
	fmt.Println()
}
