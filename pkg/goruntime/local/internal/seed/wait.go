package seed

import (
	"context"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// build is one base seed build in flight, shared by every caller of
// Builder.Dir.
type build struct {
	start time.Time
	done  chan struct{} // closed when dir and err are set
	dir   string
	err   error

	mu      sync.Mutex
	last    goruntime.Progress // the latest report
	changed chan struct{}      // closed and replaced at every report
}

func newBuild() *build {
	return &build{start: time.Now(), done: make(chan struct{}), changed: make(chan struct{}),
		last: goruntime.Progress{Stage: Stage, Message: "starting (once per machine and Go installation)"}}
}

// report records p as the build's latest progress and wakes the waiters.
func (r *build) report(p goruntime.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Elapsed = time.Since(r.start)
	r.last = p
	close(r.changed)
	r.changed = make(chan struct{})
}

// latest returns the latest report and a channel closed at the next one.
func (r *build) latest() (goruntime.Progress, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.changed
}

// progress returns the latest report, with the time since the build
// began.
func (r *build) progress() goruntime.Progress {
	p, _ := r.latest()
	p.Elapsed = time.Since(r.start)
	return p
}

// progressEvery is how often a caller waiting for the seed build gets a
// progress report when nothing else changed (the elapsed time does).
const progressEvery = 2 * time.Second

// wait blocks until the build is done or ctx ends (returning ctx.Err()),
// sending its progress to ctx's progress function (goruntime.WithProgress)
// when it has one: at once, at every new step, at most once a second for
// packages compiled, and every progressEvery when nothing changed.
func (r *build) wait(ctx context.Context) error {
	if !goruntime.HasProgress(ctx) {
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	// A report without a step (the build starting, or waiting for another
	// process's build) waits for the first tick: a seed that exists is
	// found before anything is said. Steps are reported at once.
	var sent goruntime.Progress
	if p, _ := r.latest(); p.Step == 0 {
		sent = p
	}
	sentAt := time.Now()
	for {
		p, changed := r.latest()
		if p.Step != sent.Step || p.Message != sent.Message || time.Since(sentAt) >= time.Second {
			p.Elapsed = time.Since(r.start)
			goruntime.ReportProgress(ctx, p)
			sent, sentAt = p, time.Now()
		}
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-tick.C:
		}
	}
}
