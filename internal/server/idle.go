package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// errIdleExit is the cause Serve stops with once the server has been idle
// past Config.IdleExit.
var errIdleExit = errors.New("idle past --idle-exit")

// activity tracks what keeps a server busy: requests to the runtime
// contract and commands of either API (the process API's arrive as its
// companion's events). A sandbox whose owner went away and never came
// back ends itself once nothing has been busy for Config.IdleExit
// (watchIdle): a durable sandbox handle's idle TTL holds even with no
// front end left to enforce it.
type activity struct {
	mu       sync.Mutex
	busy     int       // requests and commands in flight
	lastDone time.Time // when busy last dropped to 0 (or the start)
}

func newActivity(now time.Time) *activity { return &activity{lastDone: now} }

// enter counts one request or command in flight; the func it returns ends it.
func (a *activity) enter() func() {
	a.mu.Lock()
	a.busy++
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			if a.busy--; a.busy == 0 {
				a.lastDone = time.Now()
			}
			a.mu.Unlock()
		})
	}
}

// idleFor reports how long nothing has been in flight at now (0 while
// something is).
func (a *activity) idleFor(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy > 0 {
		return 0
	}
	return now.Sub(a.lastDone)
}

// watchIdle calls end once a has been idle for ttl, checking every ttl/8
// (at least 100 ms, at most 10 s), or returns when ctx ends.
func watchIdle(ctx context.Context, a *activity, ttl time.Duration, log *slog.Logger, end func()) {
	every := min(max(ttl/8, 100*time.Millisecond), 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if idle := a.idleFor(now); idle >= ttl {
				log.Info("idle past --idle-exit: ending the sandbox", "idle_s", idle.Seconds(), "idle_exit_s", ttl.Seconds())
				end()
				return
			}
		}
	}
}
