package local

import (
	"context"
	"fmt"
	"sync"
)

// background owns the backend's own work that outlives the call that
// started it: the seed and extra seed builds, pruning, the handle
// reaper and trash removal (the warm pool and the spare caches and disks
// have their own, package spares). Backend.Close cancels it and
// waits for it, so nothing writes into the state directory after Close
// returns; work asked for after Close does not start (go reports false).
type background struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// start runs f in a goroutine with a context Close cancels. It reports
// false, and does not run f, once Close has begun.
func (g *background) start(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
	return true
}

// close cancels the running work and waits for it until ctx ends.
func (g *background) close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("local backend: background work (seed builds, prune, trash removal) still running at close: %w", ctx.Err())
	}
}
