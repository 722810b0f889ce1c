package local

// The seed build's orchestration: one build per Backend, in the
// background, shared by every caller that waits for it (Prepare, Open),
// with its progress passed on. What a seed is and how it is built: seed.go.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Prepare builds the seed build cache if this machine has none for this Go
// installation yet (once, 1-3 minutes on 2 cores), so that later Opens
// are fast. Open calls it too. See seed for what happens when ctx ends
// first.
func (b *Backend) Prepare(ctx context.Context) error {
	_, err := b.seed(ctx)
	if err == nil {
		b.pool.refill()
	}
	return err
}

// seedReady reports whether this machine has a complete seed build cache
// for this Go installation, without building one.
func (b *Backend) seedReady() bool {
	key, err := seedKey(b.goroot)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(stateDir(b.opts.StateDir).seed(key), ".complete"))
	return err == nil
}

// seedBuildTimeout bounds one seed build. It is not tied to any caller:
// a build outlives the Open or Prepare that started it, so a caller's
// short timeout never throws the work away.
const seedBuildTimeout = 20 * time.Minute

// seedBuild is one seed build in flight, shared by every caller of seed.
type seedBuild struct {
	start time.Time
	done  chan struct{} // closed when dir and err are set
	dir   string
	err   error

	mu      sync.Mutex
	last    goruntime.Progress // the latest report
	changed chan struct{}      // closed and replaced at every report
}

// report records p as the build's latest progress and wakes the waiters.
func (r *seedBuild) report(p goruntime.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Elapsed = time.Since(r.start)
	r.last = p
	close(r.changed)
	r.changed = make(chan struct{})
}

// latest returns the latest report and a channel closed at the next one.
func (r *seedBuild) latest() (goruntime.Progress, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.changed
}

// progressEvery is how often a caller waiting for the seed build gets a
// progress report when nothing else changed (the elapsed time does).
const progressEvery = 2 * time.Second

// seed returns the seed build cache's directory. The build (or the wait
// for another process's build, under the seed's lock file) runs once per
// Backend in the background, bounded by seedBuildTimeout; callers wait for
// it with their ctx. When ctx ends first, the error says the cache is
// still being built and wraps ctx.Err(); the build goes on, and the next
// call reuses it. A failed build is retried by the next call.
func (b *Backend) seed(ctx context.Context) (string, error) {
	b.seedMu.Lock()
	if b.seedDir != "" {
		if _, err := os.Stat(filepath.Join(b.seedDir, ".complete")); err == nil {
			b.seedMu.Unlock()
			b.buildExtraSeed(b.seedDir)
			return b.seedDir, nil
		}
	}
	run := b.seedBuild
	if run == nil {
		run = &seedBuild{start: time.Now(), done: make(chan struct{}), changed: make(chan struct{}),
			last: goruntime.Progress{Stage: seedStage, Message: "starting (once per machine and Go installation)"}}
		b.seedBuild = run
		if !b.bg.start(func(bgCtx context.Context) { b.runSeedBuild(bgCtx, run) }) {
			// After Close: build in this call, bounded by its ctx.
			b.seedMu.Unlock()
			b.runSeedBuild(ctx, run)
			b.seedMu.Lock()
		}
	}
	b.seedMu.Unlock()
	if err := run.wait(ctx); err != nil {
		return "", fmt.Errorf("local backend: the seed Go build cache is still being built (%s so far; once per machine and Go installation, 1-3 minutes on 2 cores); "+
			"the build continues in the background and the next Open will reuse it: give Open a later deadline, "+
			"or call Backend.Prepare at startup: %w", time.Since(run.start).Round(time.Second), err)
	}
	if run.err == nil {
		b.buildExtraSeed(run.dir)
	}
	return run.dir, run.err
}

// wait blocks until the build is done or ctx ends (returning ctx.Err()),
// sending its progress to ctx's progress function (goruntime.WithProgress)
// when it has one: at once, at every new step, at most once a second for
// packages compiled, and every progressEvery when nothing changed.
func (r *seedBuild) wait(ctx context.Context) error {
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

func (b *Backend) runSeedBuild(ctx context.Context, run *seedBuild) {
	ctx, cancel := context.WithTimeout(ctx, seedBuildTimeout)
	defer cancel()
	dir, err := ensureSeed(ctx, b.opts.StateDir, b.goroot, b.seedEnv(), run.report)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (gave up after %s)", err, seedBuildTimeout)
	}
	b.seedMu.Lock()
	run.dir, run.err = dir, err
	if err == nil {
		b.seedDir = dir
	}
	b.seedBuild = nil
	b.seedMu.Unlock()
	close(run.done)
}
