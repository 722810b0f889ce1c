package seed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestSeedWaitReportsProgress drives a seed build's progress the way
// buildSeed does and checks what a waiting Open passes on: every new
// step, the elapsed time growing, and the end of the wait when the build
// is done.
func TestSeedWaitReportsProgress(t *testing.T) {
	run := &build{start: time.Now(), done: make(chan struct{}), changed: make(chan struct{})}
	var mu sync.Mutex
	var got []goruntime.Progress
	ctx := goruntime.WithProgress(context.Background(), func(p goruntime.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	waited := make(chan error, 1)
	go func() { waited <- run.wait(ctx) }()
	for step := 1; step <= 3; step++ {
		run.report(goruntime.Progress{Stage: Stage, Message: "step", Step: step, Steps: 3, Done: step * 10, Total: 30})
		time.Sleep(20 * time.Millisecond)
	}
	close(run.done)
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	steps := map[int]bool{}
	for i, p := range got {
		steps[p.Step] = true
		if i > 0 && p.Elapsed < got[i-1].Elapsed {
			t.Errorf("elapsed went back: %v after %v", p.Elapsed, got[i-1].Elapsed)
		}
	}
	for step := 1; step <= 3; step++ {
		if !steps[step] {
			t.Errorf("step %d never reported; got %+v", step, got)
		}
	}
}

// TestSeedWaitCallerTimeout: a caller whose ctx ends stops waiting with
// ctx's error while the build goes on.
func TestSeedWaitCallerTimeout(t *testing.T) {
	run := &build{start: time.Now(), done: make(chan struct{}), changed: make(chan struct{})}
	for _, ctx := range []context.Context{context.Background(), goruntime.WithProgress(context.Background(), func(goruntime.Progress) {})} {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := run.wait(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait = %v, want DeadlineExceeded", err)
		}
	}
}
