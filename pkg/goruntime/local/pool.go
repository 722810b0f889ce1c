package local

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/spares"
)

// The warm pool: sandboxes started ahead of time, their runtime server
// answering and their build cache linked, so that Open is a claim (a few
// microseconds) rather than a start (tens of milliseconds); as root a
// sandbox made from a snapshot is likewise a claim, layered over the
// snapshot in place (snappool.go). Pool sandboxes
// are started by the ordinary start path (Backend.open), so they get every
// isolation layer and limit any sandbox gets (under a memory budget, their
// memory limit once claimed: budget.go), and this process holds their
// lifeline: they die with it like any other. It fills only once the seed
// build cache is complete (refill), so a claimed sandbox always has it.
// The pool refills in the background after each claim, as many starts
// side by side as it lacks sandboxes (refill), once the claiming
// session's first command has ended
// (at most poolRefillDelay after the claim), so that the starts do not run
// beside that command. For the same reason, while a claimed sandbox still
// settles the pool fills to one sandbox only, and the settled claim
// refills the rest (a fresh process's first Open comes while the pool
// still fills: its first command ran beside two starts). A fresh pool
// likewise starts its first sandbox alone, and the rest once that one
// settled after a claim, or poolRefillDelay after it was ready when no
// claim is settling then (primed):
// a lone start is ready sooner than one of two side by side (~90 against
// ~130 ms on 2 slow vCPUs), and the first Open of a fresh process waits
// for it. A pool start runs at a low CPU weight, so that it takes little
// from the sandboxes running, but at the full weight while an Open waits
// for it, and a claimed sandbox has the full weight (poolweight.go). A
// start that fails backs the pool off (poolRetryMin doubling up to
// poolRetryMax) and never blocks Open, which then starts its sandbox
// itself. An Open that
// finds no sandbox ready grows the pool for a while (grow). Backend.Close
// ends the pool and the sandboxes in it.

// Timing of the warm pool's filler.
const (
	poolRetryMin  = time.Second      // first wait after a failed start
	poolRetryMax  = time.Minute      // longest wait between failed starts
	poolStartTime = 2 * time.Minute  // bound on one pool start
	poolWarmTime  = 30 * time.Second // bound on a pool sandbox's warm-up command

	// poolRefillDelay is the longest the refill after an Open waits for
	// the opened sandbox's first commands to end and poolRefillQuiet to
	// pass without another (refillAfter): a start beside a first go build
	// (even at the pool's low CPU weight, internal/cgroups) slowed it on 2
	// vCPUs. Agents pause between commands; the refill runs then.
	poolRefillDelay = 2 * time.Second
	poolRefillQuiet = 100 * time.Millisecond

	// poolShrinkAfter is how long a pool grown by demand (grow) keeps its
	// size after the last Open that found no sandbox ready.
	poolShrinkAfter = 30 * time.Second
)

// poolWarmup runs once in every pool sandbox before it is offered (but
// one an Open waits for already, start): the server's first command (its
// first shell, process group and output pipes) then costs nothing to the
// session that claims it. It starts no
// go command: the go binary and GOROOT come from the host, read by every
// sandbox alike, so a `go version` here warmed nothing a claimed sandbox
// did not have already (a claimed sandbox's `go version` took 31 ms
// after it and 32 ms after `true`), and cost each pool start a second
// process start (a fifth of its CPU time).
const poolWarmup = "true"

// warmPool holds the started sandboxes: its spares (package spares)
// start them, keep them and back off a failed start; the pool decides
// how many to keep (its target, grown by demand, one while a claim
// settles) and when to refill.
type warmPool struct {
	b      *Backend
	size   int                    // Options.WarmPool: what the pool keeps when Opens are few
	spares *spares.Pool[*Sandbox] // the started sandboxes and their starts

	mu       sync.Mutex
	settling int         // claimed sandboxes whose first commands refillAfter waits for
	target   int         // what the pool fills to now: size, or more while Opens outrun it (grow)
	filled   bool        // the pool has held its size once: an Open finding it empty since outran it
	primed   bool        // the first sandbox settled after a claim, or was ready poolRefillDelay with none settling: fill to the target
	priming  *time.Timer // primes the pool poolRefillDelay after its first sandbox was ready
	missed   time.Time   // when an Open last found no sandbox ready
	shrink   *time.Timer // brings target back to size (shrinkBack); nil while target is size
	// shrinkAfter is poolShrinkAfter (tests shorten it).
	shrinkAfter time.Duration
	closed      bool
	done        chan struct{} // closed by close

	// weights guards starting, waiters, their fields and the CPU weight
	// writes of the starts under way (poolweight.go).
	weights  sync.Mutex
	starting []*poolStart  // the starts under way, oldest first
	waiters  []*poolWaiter // the Opens waiting for a start (take)
	// madeHook, when set, hears that a start's cgroup was made, its CPU
	// weight set, and may hold the start (tests: HoldPoolStarts).
	madeHook func(cg *cgroups.Cgroup)
}

func newWarmPool(b *Backend, size int) *warmPool {
	p := &warmPool{b: b, size: size, target: size, shrinkAfter: poolShrinkAfter, done: make(chan struct{})}
	p.spares = spares.New(spares.Config[*Sandbox]{
		Make:     p.start,
		Discard:  func(s *Sandbox) error { return s.Close(context.Background()) },
		RetryMin: poolRetryMin,
		RetryMax: poolRetryMax,
		OnError:  p.startFailed,
		OnReady:  p.offered,
		OnWait:   p.waitFor,
	})
	return p
}

// claim takes a live sandbox out of the pool, or returns nil. Sandboxes
// found dead (a machine-wide kill, the OOM killer) are skipped and closed
// in the background, which close waits for.
func (p *warmPool) claim() *Sandbox {
	for {
		s, ok := p.spares.Take()
		if !ok {
			return nil
		}
		if s.check() == nil && s.serverState() == "running" && p.claimed(s) == nil {
			return s
		}
		closeDead := func() { _ = s.Close(context.Background()) }
		if !p.spares.Go(closeDead) {
			closeDead()
		}
	}
}

// take claims a sandbox from the pool. When none is ready it grows the
// pool, and when a pool start is under way that no other Open waits for,
// it waits for the pool's next sandbox, at most wait (or until ctx ends),
// giving a start it waits for the full CPU weight meanwhile (waitFor):
// that start is further along than a start of the caller's own would be,
// and a third start beside the pool's two (a fresh process's first Open,
// while its pool fills) slows them all on a small host. It returns nil
// when the caller should start its own.
func (p *warmPool) take(ctx context.Context, wait time.Duration) *Sandbox {
	if s := p.claim(); s != nil {
		return s
	}
	p.grow()
	s, _ := p.spares.TakeWait(ctx, wait, func() (*Sandbox, bool) {
		s := p.claim()
		return s, s != nil
	})
	return s
}

// refill starts, at once, as many pool starts as the pool lacks
// sandboxes, counting those under way: a start waits more than it
// computes (on namespaces, the server's start), so starts side by side
// keep up with Opens that one start at a time would not. It starts none
// while the pool is closed or a failed start asked it to wait (spares),
// none before the seed build cache is complete (Backend.seedReady
// refills then: a pool sandbox always has the seed), and while a claimed
// sandbox settles no more than one in all (refillAfter calls refill
// again when it has settled).
func (p *warmPool) refill() {
	if p.size <= 0 || !p.b.seeds.Ready() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.spares.Fill(p.want())
}

// want is what the pool fills to now: its target, or one sandbox while a
// claimed one settles or before the pool is primed. p.mu must be held.
func (p *warmPool) want() int {
	if p.settling > 0 || !p.primed {
		return 1
	}
	return p.target
}

// startFailed logs a failed pool start; the pool backs off for wait.
func (p *warmPool) startFailed(err error, wait time.Duration) {
	if errors.Is(err, ErrHostLimit) {
		// No room (the host's tasks, the memory budget): Opens are
		// refused alike until sandboxes close.
		p.b.opts.Logger.Info("local backend: warm pool starts no sandbox while there is no room for one", "err", err, "retry_in", wait)
		return
	}
	p.b.opts.Logger.Warn("local backend: warm pool could not start a sandbox; Open starts its own until a retry succeeds",
		"err", err, "retry_in", wait)
}

// start starts one sandbox by the ordinary path and warms it up.
func (p *warmPool) start(ctx context.Context) (*Sandbox, error) {
	ps := p.began()
	defer p.ended(ps) // a failed open has ended it before its cgroup went
	sctx, cancel := context.WithTimeout(ctx, poolStartTime)
	defer cancel()
	s, err := p.b.open(sctx, ps, 0)
	if err != nil {
		return nil, err
	}
	if p.waitedFor(ps) {
		// An Open waits for it (a fresh process's first): the warm-up,
		// a whole call, would hold that Open up longer than the first
		// command it warms would take more.
		return s, nil
	}
	wctx, wcancel := context.WithTimeout(ctx, poolWarmTime)
	defer wcancel()
	res, err := s.Exec(wctx, goruntime.ExecRequest{Command: poolWarmup, Timeout: poolWarmTime})
	if err == nil && res.ExitCode != 0 {
		err = errors.New("warm-up command exited " + res.Stderr)
	}
	if err != nil {
		p.ended(ps)
		_ = s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// readyCount reports how many started sandboxes wait in the pool.
func (p *warmPool) readyCount() int {
	ready, _, _ := p.spares.Stats()
	return ready
}

// evict ends what the warm pool holds of the memory budget, for an Open
// the budget refused (budget.go): it closes the sandboxes waiting in the
// pool and ends its starts under way, waiting for them until ctx ends.
// It reports whether there were any. The pool refills afterwards as it
// would have, each start within the budget.
func (p *warmPool) evict(ctx context.Context) bool { return p.spares.Evict(ctx) }

// close stops the filler and closes every sandbox in the pool, waiting
// for the pool's own goroutines (starts, refills, and the closes of
// sandboxes claim found dead or shrinkBack let go) until ctx ends. Later
// claims find nothing and refills do nothing.
func (p *warmPool) close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	for _, t := range []*time.Timer{p.shrink, p.priming} {
		if t != nil {
			t.Stop()
		}
	}
	p.mu.Unlock()
	return p.spares.Close(ctx)
}

// openSandbox is Open: a claim from the warm pool when it has a sandbox
// ready or one of its starts is under way for it (take), its memory limit
// raised within the budget (budget.claim), else a start. Either way the pool refills in the background once
// the sandbox's first commands have ended (refillAfter).
func (b *Backend) openSandbox(ctx context.Context) (*Sandbox, error) {
	if s := b.pool.take(ctx, b.opts.StartTimeout); s != nil {
		if err := b.budget.claim(ctx, s); err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		b.pool.refillAfter(s)
		b.opts.Logger.DebugContext(ctx, "local sandbox claimed from the warm pool", "id", s.meta.ID)
		return s, nil
	}
	s, err := b.open(ctx, nil, 0)
	if err == nil {
		b.pool.refillAfter(s) // fills the pool once the seed is complete
	}
	return s, err
}

// WarmPoolReady reports how many started sandboxes wait in the warm pool
// for Open to claim: at most Options.WarmPool, or more for a while when
// Opens came faster than the pool refilled (up to 2 x CPUs + 2 starts'
// worth).
func (b *Backend) WarmPoolReady() int { return b.pool.readyCount() }

// Close ends the backend's warm pool and its background work: it stops
// refilling, closes the sandboxes waiting in the pool, cancels seed builds
// and spare fillers in flight, and waits for all of it until ctx is done
// (the error then wraps ctx.Err()). Sandboxes Open returned are not
// touched (their owners close them); Open keeps working after Close,
// starting each sandbox itself (without the seed if it is missing: no
// build starts after Close, but Prepare builds it in the call).
// The last backend of the state directory to close (in any process)
// also unmounts and deletes the spare disks (users.go).
func (b *Backend) Close(ctx context.Context) error {
	return errors.Join(b.pool.close(ctx), b.caches.spares.Close(ctx), b.disks.spares.Close(ctx), b.bg.close(ctx), b.leave())
}
