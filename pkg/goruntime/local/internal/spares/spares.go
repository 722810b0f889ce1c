// Package spares keeps a few things made ahead of time, so that the
// caller who needs one takes it instead of making it: the local
// backend's warm pool of started sandboxes, its spare build caches and
// its spare disks. A Pool fills itself in the background up to a target
// (SetTarget), at most Parallel fills side by side; a fill that fails
// backs the pool off (RetryMin doubling up to RetryMax: a Fill before
// then starts nothing); Close ends the fills under way and waits for
// every goroutine the pool started.
//
// Made items wait on a shelf: the pool's own, in memory (Take claims
// from it), or a Shared shelf, such as a directory that every process
// of a state directory claims from by itself.
package spares

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Shared is a shelf outside the pool that takers claim from by
// themselves (another process, say): the pool counts what it holds and
// puts what it makes there.
type Shared[T any] interface {
	// Len is how many items wait on the shelf.
	Len() (int, error)
	// Put shelves a made item; on error the pool discards it.
	Put(T) error
}

// Config is what a Pool makes and how.
type Config[T any] struct {
	// Make makes one item; ctx ends with the pool (Close) or with the
	// fill's generation (Evict).
	Make func(ctx context.Context) (T, error)
	// Discard lets go of an item the pool will not offer: one made after
	// Close or for an evicted generation, one Trim, Evict or Close took
	// off the shelf, one a Shared shelf refused. Nil: nothing to do.
	// Close returns the errors of the items it discards.
	Discard func(T) error
	// Shared, when set, is where made items wait; Take then finds none.
	Shared Shared[T]
	// Parallel bounds the fills under way at once; 0: no bound but the
	// target.
	Parallel int
	// RetryMin is the wait after a failed fill, doubling with each
	// failure in a row up to RetryMax.
	RetryMin, RetryMax time.Duration
	// OnError hears of each failed fill (not of one Close or Evict
	// ended) and the wait before the next.
	OnError func(err error, wait time.Duration)
	// OnReady hears, outside the pool's lock, that a made item joined the
	// pool's own shelf, now holding ready items.
	OnReady func(ready int)
	// OnWait, when set, hears, outside the pool's lock, that a TakeWait
	// begins to wait for a fill under way; the func it returns (nil:
	// none) runs when that TakeWait returns, after its take. The warm
	// pool gives the start an Open waits for the full CPU weight.
	OnWait func() (done func())
}

// Pool keeps up to its target of items ready. Its methods are safe for
// concurrent use.
type Pool[T any] struct {
	cfg  Config[T]
	ctx  context.Context // ends with Close
	stop context.CancelFunc
	gen  *generation // the fills begun since the last Evict

	mu       sync.Mutex
	target   int
	ready    []T
	filling  int           // fills under way
	waiting  int           // takers waiting for one of them (TakeWait)
	changed  chan struct{} // closed (and replaced) when ready, filling or closed change
	failures int           // consecutive failed fills
	retryAt  time.Time     // no fill before this after a failure
	closed   bool
	wg       sync.WaitGroup // every goroutine of the pool; Close waits for it
}

// generation is the fills begun since the last Evict: their context,
// which Evict ends, and what it waits for them on.
type generation struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newGeneration(parent context.Context) *generation {
	ctx, cancel := context.WithCancel(parent)
	return &generation{ctx: ctx, cancel: cancel}
}

// New returns an empty pool with target 0: it fills once SetTarget or
// Fill gives it one.
func New[T any](cfg Config[T]) *Pool[T] {
	ctx, stop := context.WithCancel(context.Background())
	return &Pool[T]{cfg: cfg, ctx: ctx, stop: stop, gen: newGeneration(ctx), changed: make(chan struct{})}
}

// Fill sets the target to n and starts the fills the pool lacks.
func (p *Pool[T]) Fill(n int) {
	p.SetTarget(n)
	p.Refill()
}

// SetTarget sets the target to n without starting a fill: the next
// Refill (or the end of a fill under way) fills to it.
func (p *Pool[T]) SetTarget(n int) {
	p.mu.Lock()
	p.target = n
	p.mu.Unlock()
}

// Refill starts, at once, as many fills as the pool lacks items to its
// target, counting those under way, within Parallel. It starts none once
// closed or while a failed fill asked it to wait.
func (p *Pool[T]) Refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || time.Now().Before(p.retryAt) {
		return
	}
	have := len(p.ready)
	if p.cfg.Shared != nil {
		n, err := p.cfg.Shared.Len()
		if err != nil {
			return
		}
		have = n
	}
	for have+p.filling < p.target && (p.cfg.Parallel <= 0 || p.filling < p.cfg.Parallel) {
		p.filling++
		gen := p.gen
		p.wg.Add(1)
		gen.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer gen.wg.Done()
			p.fillOne(gen.ctx)
		}()
	}
}

// fillOne makes one item and shelves it, then refills (a taker may have
// taken meanwhile). A failed fill backs the pool off; one that Close or
// Evict ended offers nothing.
func (p *Pool[T]) fillOne(ctx context.Context) {
	item, err := p.cfg.Make(ctx)
	p.mu.Lock()
	p.filling--
	p.signal()
	if ctx.Err() != nil && p.ctx.Err() == nil { // evicted
		p.mu.Unlock()
		if err == nil {
			_ = p.discard(item)
		}
		return
	}
	if err != nil {
		p.failures++
		wait := p.backoff()
		p.retryAt = time.Now().Add(wait)
		p.mu.Unlock()
		if p.ctx.Err() == nil && p.cfg.OnError != nil {
			p.cfg.OnError(err, wait)
		}
		return
	}
	p.failures, p.retryAt = 0, time.Time{}
	if p.closed {
		p.mu.Unlock()
		_ = p.discard(item)
		return
	}
	if p.cfg.Shared != nil {
		p.mu.Unlock()
		if err := p.cfg.Shared.Put(item); err != nil {
			_ = p.discard(item)
			return
		}
	} else {
		p.ready = append(p.ready, item)
		n := len(p.ready)
		p.mu.Unlock()
		if p.cfg.OnReady != nil {
			p.cfg.OnReady(n)
		}
	}
	p.Refill()
}

// backoff is the wait after p.failures failed fills in a row. p.mu must
// be held.
func (p *Pool[T]) backoff() time.Duration {
	wait := p.cfg.RetryMin << min(p.failures-1, 20)
	if p.cfg.RetryMax > 0 && (wait > p.cfg.RetryMax || wait < 0) {
		wait = p.cfg.RetryMax
	}
	return wait
}

func (p *Pool[T]) discard(item T) error {
	if p.cfg.Discard == nil {
		return nil
	}
	return p.cfg.Discard(item)
}

// signal wakes the takers waiting in TakeWait. p.mu must be held.
func (p *Pool[T]) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Take takes the oldest item off the pool's own shelf; false when none
// is ready (always, with a Shared shelf).
func (p *Pool[T]) Take() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var zero T
	if len(p.ready) == 0 {
		return zero, false
	}
	item := p.ready[0]
	p.ready[0] = zero
	p.ready = p.ready[1:]
	return item, true
}

// TakeWait takes an item with take (Take, or one that also checks what
// it took), and while none is ready and a fill is under way that no
// other TakeWait waits for, waits for the pool's next item, until ctx
// or wait ends (Config.OnWait hears when it begins to wait). false: the
// caller should make its own.
func (p *Pool[T]) TakeWait(ctx context.Context, wait time.Duration, take func() (T, bool)) (T, bool) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	waited := false
	var done func()
	defer func() {
		if done != nil {
			done()
		}
	}()
	for {
		if item, ok := take(); ok {
			return item, true
		}
		p.mu.Lock()
		if p.closed || p.waiting >= p.filling {
			p.mu.Unlock()
			var zero T
			return zero, false
		}
		p.waiting++
		changed := p.changed
		p.mu.Unlock()
		if !waited && p.cfg.OnWait != nil {
			done = p.cfg.OnWait()
		}
		waited = true
		var out bool
		select {
		case <-changed:
		case <-ctx.Done():
			out = true
		case <-deadline.C:
			out = true
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if out {
			var zero T
			return zero, false
		}
	}
}

// Go runs f in a goroutine that Close waits for; false, and f does not
// run, once the pool is closed.
func (p *Pool[T]) Go(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// Trim discards, in the background (Close waits), the ready items past
// the first n.
func (p *Pool[T]) Trim(n int) {
	p.mu.Lock()
	if p.closed || len(p.ready) <= n {
		p.mu.Unlock()
		return
	}
	surplus := append([]T(nil), p.ready[n:]...)
	p.ready = p.ready[:n]
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	for _, item := range surplus {
		_ = p.discard(item)
	}
}

// Evict discards the ready items and ends the fills under way, waiting
// for them until ctx ends; it reports whether there were any. Fills
// begun afterwards run as usual.
func (p *Pool[T]) Evict(ctx context.Context) bool {
	p.mu.Lock()
	ready, gen, filling := p.ready, p.gen, p.filling
	p.ready = nil
	p.gen = newGeneration(p.ctx)
	p.mu.Unlock()
	gen.cancel()
	for _, item := range ready {
		_ = p.discard(item)
	}
	ended := make(chan struct{})
	go func() {
		gen.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return len(ready)+filling > 0
}

// Stats is, in one snapshot, how many items wait on the pool's own
// shelf, how many fills are under way and how many takers wait for them.
func (p *Pool[T]) Stats() (ready, filling, waiting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready), p.filling, p.waiting
}

// Ready is a copy of the pool's own shelf, oldest first.
func (p *Pool[T]) Ready() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]T(nil), p.ready...)
}

// Closed reports whether Close has begun.
func (p *Pool[T]) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close ends the fills under way, discards the ready items (a Shared
// shelf keeps its own) and waits for every goroutine of the pool until
// ctx ends (the error then wraps ctx.Err()). Later fills start nothing
// and Take finds nothing.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.signal()
	}
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	p.stop()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("spares: fills still running at close: %w", ctx.Err()))
	}
	for _, item := range ready {
		errs = append(errs, p.discard(item))
	}
	return errors.Join(errs...)
}
