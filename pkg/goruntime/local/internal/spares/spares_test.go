package spares

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gate is a Make whose fills wait until the test lets each one through.
type gate struct {
	started chan struct{} // one send per fill begun
	release chan error    // one receive per fill let through, with its error
	next    atomic.Int64
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 100), release: make(chan error)}
}

func (g *gate) make(ctx context.Context) (int, error) {
	g.started <- struct{}{}
	select {
	case err := <-g.release:
		if err != nil {
			return 0, err
		}
		return int(g.next.Add(1)), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// waitFor waits until cond holds, polling: the pool's goroutines end on
// their own, and the test asserts what they end in, not how soon.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestTakeWhileEmpty(t *testing.T) {
	p := New(Config[int]{Make: func(context.Context) (int, error) { return 1, nil }})
	defer p.Close(context.Background())
	if v, ok := p.Take(); ok {
		t.Fatalf("Take on a pool never filled = %d, true; want none", v)
	}
	// No fill under way: TakeWait does not wait, whatever its bound.
	if v, ok := p.TakeWait(context.Background(), time.Hour, p.Take); ok {
		t.Fatalf("TakeWait with no fill under way = %d, true; want none", v)
	}
}

func TestFillsToTargetAndTakes(t *testing.T) {
	g := newGate()
	p := New(Config[int]{Make: g.make})
	defer p.Close(context.Background())
	p.Fill(3)
	for range 3 {
		<-g.started
	}
	if _, filling, _ := p.Stats(); filling != 3 {
		t.Fatalf("fills under way = %d after Fill(3), want 3", filling)
	}
	for range 3 {
		g.release <- nil
	}
	waitFor(t, "3 ready", func() bool { r, _, _ := p.Stats(); return r == 3 })
	if v, ok := p.Take(); !ok || v == 0 {
		t.Fatalf("Take = %d, %v; want an item", v, ok)
	}
	// The take leaves the pool one short: it refills on the next Refill
	// (here that of a finished fill has passed, so ask).
	p.Refill()
	<-g.started
	g.release <- nil
	waitFor(t, "refilled to 3", func() bool { r, _, _ := p.Stats(); return r == 3 })
}

func TestParallelBound(t *testing.T) {
	g := newGate()
	p := New(Config[int]{Make: g.make, Parallel: 1})
	defer p.Close(context.Background())
	p.Fill(2)
	<-g.started
	if _, filling, _ := p.Stats(); filling != 1 {
		t.Fatalf("fills under way = %d with Parallel 1, want 1", filling)
	}
	g.release <- nil // the first ends; its Refill starts the second
	<-g.started
	g.release <- nil
	waitFor(t, "2 ready", func() bool { r, f, _ := p.Stats(); return r == 2 && f == 0 })
}

func TestFillErrorBacksOff(t *testing.T) {
	g := newGate()
	var waits []time.Duration
	var mu sync.Mutex
	p := New(Config[int]{Make: g.make, RetryMin: time.Hour, RetryMax: 2 * time.Hour,
		OnError: func(err error, wait time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, wait)
		}})
	defer p.Close(context.Background())
	p.Fill(1)
	<-g.started
	g.release <- errors.New("no room")
	waitFor(t, "the failed fill ended", func() bool { _, f, _ := p.Stats(); return f == 0 })
	// Within the back-off no fill starts, however often asked.
	p.Refill()
	p.Fill(2)
	if _, filling, _ := p.Stats(); filling != 0 {
		t.Fatalf("fills under way = %d within the back-off, want 0", filling)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] != time.Hour {
		t.Fatalf("OnError waits = %v, want [1h]", waits)
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	p := New(Config[int]{RetryMin: time.Second, RetryMax: 5 * time.Second})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		p.failures = i + 1
		if got := p.backoff(); got != w {
			t.Errorf("backoff after %d failures = %v, want %v", i+1, got, w)
		}
	}
	p.failures = 1000
	if got := p.backoff(); got != 5*time.Second {
		t.Errorf("backoff after 1000 failures = %v, want the max", got)
	}
}

func TestCloseDuringFill(t *testing.T) {
	g := newGate()
	var discarded atomic.Int64
	p := New(Config[int]{Make: g.make, Discard: func(int) error { discarded.Add(1); return nil }})
	p.Fill(2)
	<-g.started
	<-g.started
	// The fills wait on their context: Close ends them and waits.
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r, f, _ := p.Stats(); r != 0 || f != 0 {
		t.Fatalf("after Close: %d ready, %d filling; want none", r, f)
	}
	p.Fill(2) // starts nothing once closed
	if _, f, _ := p.Stats(); f != 0 {
		t.Fatalf("Fill after Close started %d fills", f)
	}
	if p.Go(func() {}) {
		t.Fatal("Go after Close ran its function")
	}
}

func TestCloseDiscardsReadyAndLateItems(t *testing.T) {
	var discarded atomic.Int64
	made := make(chan struct{})
	p := New(Config[int]{
		Make: func(ctx context.Context) (int, error) {
			<-made // ignores ctx: an item made after Close
			return 7, nil
		},
		Discard: func(int) error { discarded.Add(1); return errors.New("closing failed") },
	})
	p.Fill(1)
	closed := make(chan error)
	go func() { closed <- p.Close(context.Background()) }()
	waitFor(t, "Close begun", p.Closed)
	close(made)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v; no ready item's discard should be in it", err)
	}
	if n := discarded.Load(); n != 1 {
		t.Fatalf("discarded %d items, want the one made after Close", n)
	}

	q := New(Config[int]{Make: func(context.Context) (int, error) { return 1, nil },
		Discard: func(int) error { return errors.New("closing failed") }})
	q.Fill(1)
	waitFor(t, "1 ready", func() bool { r, _, _ := q.Stats(); return r == 1 })
	if err := q.Close(context.Background()); err == nil {
		t.Fatal("Close of a pool with a ready item whose discard fails returned nil")
	}
}

func TestCloseWaitsUntilCtx(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	p := New(Config[int]{Make: func(context.Context) (int, error) { <-stuck; return 0, nil }})
	p.Fill(1)
	waitFor(t, "fill begun", func() bool { _, f, _ := p.Stats(); return f == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended ctx and a fill that ignores it = %v, want context.Canceled", err)
	}
}

func TestTakeWaitWaitsForFillUnderWay(t *testing.T) {
	g := newGate()
	p := New(Config[int]{Make: g.make})
	defer p.Close(context.Background())
	p.Fill(1)
	<-g.started
	got := make(chan bool)
	go func() {
		_, ok := p.TakeWait(context.Background(), time.Hour, p.Take)
		got <- ok
	}()
	waitFor(t, "a waiting taker", func() bool { _, _, w := p.Stats(); return w == 1 })
	// A second taker finds the one fill spoken for: it does not wait.
	if _, ok := p.TakeWait(context.Background(), time.Hour, p.Take); ok {
		t.Fatal("a second TakeWait took the item the first waits for")
	}
	g.release <- nil
	if !<-got {
		t.Fatal("TakeWait did not get the item of the fill it waited for")
	}
}

// TestOnWait: OnWait hears each TakeWait that waits for a fill under
// way, once however long it waits, and its done runs when that TakeWait
// returns; a TakeWait that does not wait is not heard.
func TestOnWait(t *testing.T) {
	g := newGate()
	var waits, dones atomic.Int64
	p := New(Config[int]{Make: g.make, OnWait: func() func() {
		waits.Add(1)
		return func() { dones.Add(1) }
	}})
	defer p.Close(context.Background())
	if _, ok := p.TakeWait(context.Background(), time.Hour, p.Take); ok || waits.Load() != 0 {
		t.Fatalf("TakeWait with no fill under way: took %v, OnWait heard %d; want neither", ok, waits.Load())
	}
	p.Fill(1)
	<-g.started
	got := make(chan bool)
	go func() {
		_, ok := p.TakeWait(context.Background(), time.Hour, p.Take)
		got <- ok
	}()
	waitFor(t, "OnWait", func() bool { return waits.Load() == 1 })
	if dones.Load() != 0 {
		t.Fatal("OnWait's done ran while its TakeWait still waits")
	}
	g.release <- nil
	if !<-got {
		t.Fatal("TakeWait did not get the item of the fill it waited for")
	}
	if w, d := waits.Load(), dones.Load(); w != 1 || d != 1 {
		t.Fatalf("OnWait heard %d waits and %d dones, want 1 and 1", w, d)
	}
}

func TestTakeWaitEndsWithCtx(t *testing.T) {
	g := newGate()
	p := New(Config[int]{Make: g.make})
	defer p.Close(context.Background())
	p.Fill(1)
	<-g.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := p.TakeWait(ctx, time.Hour, p.Take); ok {
		t.Fatal("TakeWait with an ended ctx took an item")
	}
}

func TestEvict(t *testing.T) {
	g := newGate()
	var discarded atomic.Int64
	p := New(Config[int]{Make: g.make, Discard: func(int) error { discarded.Add(1); return nil }})
	defer p.Close(context.Background())
	p.Fill(2)
	<-g.started
	<-g.started
	g.release <- nil
	waitFor(t, "1 ready", func() bool { r, _, _ := p.Stats(); return r == 1 })
	if !p.Evict(context.Background()) {
		t.Fatal("Evict of a pool with a ready item and a fill reported nothing")
	}
	if r, f, _ := p.Stats(); r != 0 || f != 0 {
		t.Fatalf("after Evict: %d ready, %d filling; want none", r, f)
	}
	if discarded.Load() != 1 {
		t.Fatalf("Evict discarded %d, want the ready one", discarded.Load())
	}
	if p.Evict(context.Background()) {
		t.Fatal("Evict of an empty pool reported something")
	}
	// The pool fills again afterwards, in a new generation.
	p.Refill()
	<-g.started
	g.release <- nil
	waitFor(t, "refilled after evict", func() bool { r, _, _ := p.Stats(); return r >= 1 })
}

func TestTrim(t *testing.T) {
	var discarded atomic.Int64
	p := New(Config[int]{Make: func(context.Context) (int, error) { return 1, nil },
		Discard: func(int) error { discarded.Add(1); return nil }})
	defer p.Close(context.Background())
	p.Fill(3)
	waitFor(t, "3 ready", func() bool { r, _, _ := p.Stats(); return r == 3 })
	p.Trim(1)
	if r, _, _ := p.Stats(); r != 1 || discarded.Load() != 2 {
		t.Fatalf("after Trim(1): %d ready, %d discarded; want 1, 2", r, discarded.Load())
	}
}

// shelf is a Shared shelf: a count other takers take from.
type shelf struct {
	mu    sync.Mutex
	items []int
	fail  bool
}

func (s *shelf) Len() (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return len(s.items), nil }
func (s *shelf) Put(v int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("full")
	}
	s.items = append(s.items, v)
	return nil
}

func TestSharedShelf(t *testing.T) {
	sh := &shelf{items: []int{100}} // one left by another process
	var discarded atomic.Int64
	p := New(Config[int]{Make: func(context.Context) (int, error) { return 1, nil }, Shared: sh, Parallel: 1,
		Discard: func(int) error { discarded.Add(1); return nil }})
	defer p.Close(context.Background())
	p.Fill(3)
	waitFor(t, "shelf of 3", func() bool { n, _ := sh.Len(); return n == 3 })
	if _, ok := p.Take(); ok {
		t.Fatal("Take of a pool with a shared shelf found an item")
	}
	sh.mu.Lock()
	sh.items, sh.fail = sh.items[:2], true // another process took one; the shelf now refuses
	sh.mu.Unlock()
	p.Refill()
	waitFor(t, "the refused item discarded", func() bool { return discarded.Load() == 1 })
}

func TestKeyed(t *testing.T) {
	made := map[string]int{}
	var mu sync.Mutex
	k := NewKeyed(func(key string) *Pool[string] {
		return New(Config[string]{Make: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			made[key]++
			return key, nil
		}})
	})
	k.Fill("a", 2)
	k.Fill("b", 1)
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.Fill("c", 1) // closed: no pool, no fill
	mu.Lock()
	defer mu.Unlock()
	if made["c"] != 0 || made["a"] > 2 || made["b"] > 1 {
		t.Fatalf("made %v: want at most a:2 b:1 and no c", made)
	}
}
