package local

import (
	"slices"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
)

// The CPU weight of the warm pool's sandboxes (the weights themselves:
// internal/cgroups weight.go), decided here alone. A pool start runs at
// the low background weight, so that it takes little CPU time from the
// sandboxes running: the pool refills right after a claim, beside the
// claiming session's first command. While an Open waits for the start
// (take: a fresh process's first Open, while its pool fills for the
// first time), the start is that Open's as much as a start of its own
// would be, and it has the full weight: at the low weight, on a busy
// host, the first Open of a fresh mcp-server waited for a start that
// every other task outweighed sixteen to one. When no Open waits for it
// any more (one took another sandbox, or gave up), it is low again; an
// Open whose start ended waits, until it takes a sandbox, for another
// start under way, which it weighs instead. A claimed sandbox has the
// full weight for good (claimed). (A start that joins the pool while an
// Open waits for it keeps the full weight there, running nothing, if
// that Open then takes another sandbox or gives up: the weight of an
// idle sandbox takes nothing from anyone, and its claim would raise it
// again.)

// poolStart is one warm-pool start under way (warmPool.start): its
// cgroup once made (opening.cgroup), and how many Opens wait for it.
// warmPool.weights guards its fields.
type poolStart struct {
	cg      *cgroups.Cgroup // nil until made
	waiters int             // Opens waiting for it (poolWaiter)
	full    bool            // its cgroup has the full CPU weight
	ended   bool            // it was offered to the pool, or failed: no longer the starts' to weigh
}

// poolWaiter is an Open waiting for a pool start (waitFor): the start it
// weighs, nil while there is none under way. warmPool.weights guards it.
type poolWaiter struct{ ps *poolStart }

// began registers a pool start under way. An Open that waits for none
// (none was registered yet, or its start ended) or for one another Open
// waits for too (the pool counts a start before it registers: spares)
// waits for it.
func (p *warmPool) began() *poolStart {
	ps := &poolStart{}
	p.weights.Lock()
	defer p.weights.Unlock()
	p.starting = append(p.starting, ps)
	for _, w := range p.waiters {
		if w.ps == nil || w.ps.waiters > 1 {
			p.assign(w)
		}
	}
	return ps
}

// made records ps's cgroup, made at the background weight: at once the
// full weight if an Open waits for ps already. madeHook (tests) runs
// after it, outside the lock.
func (p *warmPool) made(ps *poolStart, cg *cgroups.Cgroup) {
	p.weights.Lock()
	ps.cg = cg
	p.weigh(ps)
	hook := p.madeHook
	p.weights.Unlock()
	if hook != nil {
		hook(cg)
	}
}

// ended takes ps off the starts under way, before its cgroup goes (a
// failed start) or its sandbox joins the pool: a claim then gives the
// sandbox its weight (claimed). The Opens that waited for ps wait for
// another start under way until they take a sandbox (one of them, most
// likely ps's). It may be called more than once.
func (p *warmPool) ended(ps *poolStart) {
	p.weights.Lock()
	defer p.weights.Unlock()
	if ps.ended {
		return
	}
	ps.ended = true
	p.starting = slices.DeleteFunc(p.starting, func(s *poolStart) bool { return s == ps })
	for _, w := range p.waiters {
		if w.ps == ps {
			p.assign(w)
		}
	}
}

// waitFor hears that an Open waits for the pool's next sandbox
// (spares' OnWait, from take): the Open waits for a start under way
// (assign) until the returned func says it no longer waits.
func (p *warmPool) waitFor() (done func()) {
	p.weights.Lock()
	defer p.weights.Unlock()
	w := &poolWaiter{}
	p.waiters = append(p.waiters, w)
	p.assign(w)
	return func() {
		p.weights.Lock()
		defer p.weights.Unlock()
		p.waiters = slices.DeleteFunc(p.waiters, func(x *poolWaiter) bool { return x == w })
		p.unassign(w)
	}
}

// assign has w wait for the oldest start under way that the fewest
// other Opens wait for (none, while there are enough starts), giving it
// the full CPU weight, and no longer for the one it waited for. p.weights
// must be held.
func (p *warmPool) assign(w *poolWaiter) {
	p.unassign(w)
	for _, s := range p.starting {
		if w.ps == nil || s.waiters < w.ps.waiters {
			w.ps = s
		}
	}
	if w.ps != nil {
		w.ps.waiters++
		p.weigh(w.ps)
	}
}

// unassign has w wait for no start. p.weights must be held.
func (p *warmPool) unassign(w *poolWaiter) {
	if w.ps != nil {
		w.ps.waiters--
		p.weigh(w.ps)
		w.ps = nil
	}
}

// weigh gives ps's cgroup the full CPU weight while an Open waits for
// it, and the background weight otherwise, until ps ends. p.weights must
// be held: a weight written follows the latest waiters.
func (p *warmPool) weigh(ps *poolStart) {
	full := ps.waiters > 0
	if ps.cg == nil || ps.ended || full == ps.full {
		return
	}
	set := ps.cg.Background
	if full {
		set = ps.cg.Foreground
	}
	if err := set(p.b.opts.CPUs); err != nil {
		p.b.opts.Logger.Warn("local backend: could not change the CPU weight of a warm pool start", "full", full, "err", err)
		return
	}
	ps.full = full
}

// waitedFor reports whether an Open waits for ps now.
func (p *warmPool) waitedFor(ps *poolStart) bool {
	p.weights.Lock()
	defer p.weights.Unlock()
	return ps.waiters > 0
}

// claimed gives s, claimed from the pool, the full CPU weight for good.
func (p *warmPool) claimed(s *Sandbox) error { return s.meta.Cgroup.Foreground(p.b.opts.CPUs) }
