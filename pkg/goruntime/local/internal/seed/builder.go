package seed

// One backend's seed builds: the base seed's once, in the background,
// shared by every caller that waits for it (the backend's Prepare and
// Open), with its progress passed on (wait.go); the extra seed's after it.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// buildTimeout bounds one seed build. It is not tied to any caller: a
// build outlives the Open or Prepare that started it, so a caller's short
// timeout never throws the work away.
const buildTimeout = 20 * time.Minute

// Builder runs the seed builds of one Go installation in one seed root
// for one backend. Its methods are safe for concurrent use.
type Builder struct {
	root, goroot string
	env          func() []string                  // the build's environment (ensure)
	start        func(func(context.Context)) bool // runs work that outlives its caller; false once closed
	log          *slog.Logger

	mu    sync.Mutex
	dir   string // the complete base seed, once known
	build *build // the base seed's build in flight, or nil

	extraStarted atomic.Bool // the extra seed build runs or ran
}

// NewBuilder returns the Builder of the seeds of goroot in root (a state
// directory's seed/), built with env's environment. start runs background
// work: the builds, which it must cancel and wait for when the backend
// closes, and report false for (not run) after.
func NewBuilder(root, goroot string, env func() []string, start func(func(context.Context)) bool, log *slog.Logger) *Builder {
	return &Builder{root: root, goroot: goroot, env: env, start: start, log: log}
}

// Ready reports whether the base seed is complete, without building it.
func (sb *Builder) Ready() bool {
	key, err := keyOf(sb.goroot)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(sb.root, key, ".complete"))
	return err == nil
}

// StillBuilding is Dir's error when the caller's ctx ended before the
// build did: the build goes on, and the next call reuses it.
type StillBuilding struct {
	Elapsed time.Duration // how long the build has run
	Err     error         // ctx's error
}

func (e *StillBuilding) Error() string {
	return fmt.Sprintf("the seed Go build cache is still being built (%s so far): %v", e.Elapsed.Round(time.Second), e.Err)
}

func (e *StillBuilding) Unwrap() error { return e.Err }

// Dir returns the base seed's directory. The build (or the wait for
// another process's build, under the seed's lock file) runs once per
// Builder in the background, bounded by buildTimeout; callers wait for it
// with their ctx. When ctx ends first, the error is a *StillBuilding; the
// build goes on. A failed build is retried by the next call. Once the
// base seed is there, Dir starts the extra seed's build in the
// background.
func (sb *Builder) Dir(ctx context.Context) (string, error) {
	sb.mu.Lock()
	if sb.dir != "" {
		if _, err := os.Stat(filepath.Join(sb.dir, ".complete")); err == nil {
			sb.mu.Unlock()
			sb.buildExtra(sb.dir)
			return sb.dir, nil
		}
	}
	run := sb.build
	if run == nil {
		run = newBuild()
		sb.build = run
		if !sb.start(func(bgCtx context.Context) { sb.run(bgCtx, run) }) {
			// Closed: build in this call, bounded by its ctx.
			sb.mu.Unlock()
			sb.run(ctx, run)
			sb.mu.Lock()
		}
	}
	sb.mu.Unlock()
	if err := run.wait(ctx); err != nil {
		return "", &StillBuilding{Elapsed: time.Since(run.start), Err: err}
	}
	if run.err == nil {
		sb.buildExtra(run.dir)
	}
	return run.dir, run.err
}

func (sb *Builder) run(ctx context.Context, run *build) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	dir, err := ensure(ctx, sb.root, sb.goroot, sb.env(), run.report)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (gave up after %s)", err, buildTimeout)
	}
	sb.mu.Lock()
	run.dir, run.err = dir, err
	if err == nil {
		sb.dir = dir
	}
	sb.build = nil
	sb.mu.Unlock()
	close(run.done)
}

// buildExtra builds the extra seed of base once per Builder, in the
// background. Failures are logged: sandboxes keep using the base seed,
// and the next call retries.
func (sb *Builder) buildExtra(base string) {
	if WithExtra(base) != base || !sb.extraStarted.CompareAndSwap(false, true) {
		return
	}
	started := sb.start(func(bgCtx context.Context) {
		ctx, cancel := context.WithTimeout(bgCtx, buildTimeout)
		defer cancel()
		start := time.Now()
		dir, err := ensureExtra(ctx, sb.root, sb.goroot, sb.env())
		if err != nil && bgCtx.Err() != nil {
			// Closed: what the build compiled is kept for the next one.
			sb.log.Debug("local backend: extra seed build cache paused by Close; the next backend resumes it", "after", time.Since(start).Round(time.Second))
			return
		}
		if err != nil {
			sb.log.Warn("local backend: extra seed build cache (race, cover) not built; go test -race and -cover compile the standard library on first use",
				"err", fmt.Errorf("%w (after %s)", err, time.Since(start).Round(time.Second)))
			sb.extraStarted.Store(false) // the next call retries
			return
		}
		sb.log.Debug("local backend: extra seed build cache ready", "dir", dir, "took", time.Since(start).Round(time.Second))
	})
	if !started {
		sb.extraStarted.Store(false)
	}
}

// Extra builds the extra seed of base now, waiting for it, unless it is
// complete.
func (sb *Builder) Extra(ctx context.Context, base string) error {
	if WithExtra(base) != base {
		return nil
	}
	if _, err := ensureExtra(ctx, sb.root, sb.goroot, sb.env()); err != nil {
		return fmt.Errorf("build the extra seed build cache: %w", err)
	}
	return nil
}
