package local

import (
	"sync"
	"time"
)

// When the warm pool refills, and to how many (pool.go): after a claimed
// sandbox's first commands (refillAfter), once a fresh pool's first
// sandbox has been ready a while (offered, prime), and past its size
// while Opens outrun it (grow, shrinkBack).

// grow raises the pool's target by one sandbox, up to startSlots: an Open
// found none ready, so Opens come faster than the pool refills (a pool
// start, warm-up included, takes longer than the time between two Opens
// times the pool's size), whether that Open then waits for a pool start
// under way or starts its own. The pool keeps its new size until no Open
// has found it empty for poolShrinkAfter. A pool still filling for the
// first time (a fresh process's first Open) does not grow: it is not
// short, only not full yet.
func (p *warmPool) grow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.size <= 0 || p.closed || !p.filled {
		return
	}
	p.missed = time.Now()
	p.target = min(p.target+1, max(p.size, startSlots()))
	if p.shrink == nil && p.target > p.size {
		p.shrink = time.AfterFunc(p.shrinkAfter, p.shrinkBack)
	}
}

// shrinkBack brings a grown pool back to its size once no Open has found
// it empty for poolShrinkAfter, closing the sandboxes waiting past it.
func (p *warmPool) shrinkBack() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if rest := p.shrinkAfter - time.Since(p.missed); rest > 0 {
		p.shrink.Reset(rest)
		p.mu.Unlock()
		return
	}
	p.target, p.shrink = p.size, nil
	p.spares.SetTarget(p.want())
	p.mu.Unlock()
	p.spares.Trim(p.size)
}

// refillAfter refills the pool once s has run its first commands and
// rested poolRefillQuiet (Session.Execute unpacks the files, then runs
// the command: two commands back to back), once s is closed or
// disconnected, or poolRefillDelay from now, whichever comes first.
func (p *warmPool) refillAfter(s *Sandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.size <= 0 || p.closed {
		return
	}
	idle := make(chan struct{})
	var (
		mu      sync.Mutex
		running int
		quiet   *time.Timer
		once    sync.Once
	)
	rested := func() { once.Do(func() { close(idle) }) }
	s.mu.Lock()
	s.onEnd = rested
	s.onCommand = func(start bool) {
		mu.Lock()
		defer mu.Unlock()
		if quiet != nil {
			quiet.Stop()
		}
		if start {
			running++
			return
		}
		if running--; running == 0 {
			quiet = time.AfterFunc(poolRefillQuiet, rested)
		}
	}
	s.mu.Unlock()
	settled := func() {
		s.mu.Lock()
		s.onCommand, s.onEnd = nil, nil
		s.mu.Unlock()
	}
	p.settling++
	started := p.spares.Go(func() {
		t := time.NewTimer(poolRefillDelay)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
		case <-p.done:
		}
		settled()
		p.mu.Lock()
		p.settling--
		p.primed = true
		p.mu.Unlock()
		p.refill()
	})
	if !started {
		p.settling--
		settled()
	}
}

// prime lets a fresh pool fill to its target once its first sandbox has
// been ready poolRefillDelay. While a claimed sandbox still settles it
// does nothing: refillAfter primes the pool when that one has.
func (p *warmPool) prime() {
	p.mu.Lock()
	if p.settling > 0 {
		p.mu.Unlock()
		return
	}
	p.primed = true
	p.mu.Unlock()
	p.refill()
}

// offered hears that a started sandbox joined the pool, ready ones now
// holding ready: the pool has held its size once (filled), and a fresh
// pool primes itself poolRefillDelay after its first sandbox.
func (p *warmPool) offered(ready int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.filled = p.filled || ready >= p.size
	if !p.primed && p.priming == nil && !p.closed {
		p.priming = time.AfterFunc(poolRefillDelay, p.prime)
	}
}
