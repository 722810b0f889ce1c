// The race-free version: a mutex, an atomic counter, sync.Once and
// errgroup-style error collection with plain sync.
package main

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

type SafeMap struct {
	mu sync.RWMutex
	m  map[string]int
}

func (s *SafeMap) Inc(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k]++
}

func main() {
	sm := &SafeMap{m: map[string]int{}}
	var hits atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once.Do(func() { fmt.Println("initialised once") })
			sm.Inc(fmt.Sprintf("bucket-%d", i%5))
			hits.Add(int64(i))
			if i%17 == 0 {
				mu.Lock()
				errs = append(errs, fmt.Errorf("job %d failed", i))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	keys := make([]string, 0, len(sm.m))
	for k := range sm.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Println(k, sm.m[k])
	}
	fmt.Println("hits:", hits.Load())
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	fmt.Println(errors.Join(errs...))
}
