package seed

// One backend's seed builds: the base seed's once, in the background,
// shared by every caller that waits for it (the backend's Prepare), with
// its progress passed on (wait.go), and started by the first sandbox that
// opens without it (Current: no Open waits for it, meanwhile.go); the
// extra seed's after it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// buildTimeout bounds one seed build. It is not tied to any caller: a
// build outlives the Open or Prepare that started it, so a caller's short
// timeout never throws the work away.
const buildTimeout = 20 * time.Minute

// retryAfter is how long after a failed base seed build Current leaves
// the seed alone (sandboxes open without it) before it starts another:
// one that fails at once (a state directory the seed cannot be written
// to) would otherwise start again with every Open. Dir (Prepare) retries
// at once.
const retryAfter = time.Minute

// Builder runs the seed builds of one Go installation in one seed root
// for one backend. Its methods are safe for concurrent use.
type Builder struct {
	root, goroot string
	env          func() []string                  // the build's environment (ensure)
	start        func(func(context.Context)) bool // runs work that outlives its caller; false once closed
	ready        func(dir string)                 // told when a build of this Builder's completes the base seed
	log          *slog.Logger

	mu     sync.Mutex
	dir    string    // the complete base seed, once known
	build  *build    // the base seed's build in flight, or nil
	failed time.Time // when the last base seed build failed (retryAfter)

	extraStarted atomic.Bool // the extra seed build runs or ran
}

// NewBuilder returns the Builder of the seeds of goroot in root (a state
// directory's seed/), built with env's environment. start runs background
// work: the builds, which it must cancel and wait for when the backend
// closes, and report false for (not run) after. ready, when not nil, is
// called (from the build's goroutine) each time a base seed build of this
// Builder ends with the seed complete, whoever built it.
func NewBuilder(root, goroot string, env func() []string, start func(func(context.Context)) bool, ready func(dir string), log *slog.Logger) *Builder {
	return &Builder{root: root, goroot: goroot, env: env, start: start, ready: ready, log: log}
}

// Ready reports whether the base seed is complete, without building it.
func (sb *Builder) Ready() bool {
	_, ok := sb.complete()
	return ok
}

// LockPath is the base seed's lock file: the process building the seed
// holds it (flock), and a build of another waits for it.
func (sb *Builder) LockPath() (string, error) {
	key, err := keyOf(sb.goroot)
	if err != nil {
		return "", err
	}
	return lockPath(sb.root, key), nil
}

// complete returns the base seed's directory when it is complete.
func (sb *Builder) complete() (string, bool) {
	sb.mu.Lock()
	dir := sb.dir
	sb.mu.Unlock()
	if dir == "" {
		key, err := keyOf(sb.goroot)
		if err != nil {
			return "", false
		}
		dir = filepath.Join(sb.root, key)
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return "", false
	}
	sb.mu.Lock()
	sb.dir = dir
	sb.mu.Unlock()
	return dir, true
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

// Dir returns the base seed's directory, waiting for it. The build (or
// the wait for another process's build, under the seed's lock file) runs
// once per Builder in the background, bounded by buildTimeout; callers
// wait for it with their ctx. When ctx ends first, the error is a
// *StillBuilding; the build goes on. A failed build is retried by the
// next call. Once the base seed is there, Dir starts the extra seed's
// build in the background.
func (sb *Builder) Dir(ctx context.Context) (string, error) {
	if dir, ok := sb.complete(); ok {
		sb.buildExtra(dir)
		return dir, nil
	}
	run := sb.begin(ctx, true)
	if err := run.wait(ctx); err != nil {
		return "", &StillBuilding{Elapsed: time.Since(run.start), Err: err}
	}
	if run.err == nil {
		sb.buildExtra(run.dir)
	}
	return run.dir, run.err
}

// Current returns at once the seed a sandbox opened now starts from: the
// base seed's directory once it is complete (ready), else Empty's, while
// the base seed builds in the background: started here unless a build is
// under way, the last one failed less than retryAfter ago, or the
// backend has closed. When it returns Empty's, it tells ctx's progress
// function (goruntime.WithProgress) so, once, with how far the build is
// (meanwhile). Once the base seed is there, Current starts the extra
// seed's build in the background.
func (sb *Builder) Current(ctx context.Context) (dir string, ready bool, err error) {
	if dir, ok := sb.complete(); ok {
		sb.buildExtra(dir)
		return dir, true, nil
	}
	empty, err := Empty(sb.root)
	if err != nil {
		return "", false, err
	}
	var p *goruntime.Progress
	if run := sb.begin(ctx, false); run != nil {
		last := run.progress()
		p = &last
	}
	goruntime.ReportProgress(ctx, meanwhile(p))
	return empty, false, nil
}

// begin returns the base seed's build in flight, starting one in the
// background if none is. A build that cannot start in the background
// (the backend has closed) runs in this call, bounded by ctx, when wait
// is set; otherwise begin returns nil, as it does within retryAfter of a
// failed build.
func (sb *Builder) begin(ctx context.Context, wait bool) *build {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.build != nil {
		return sb.build
	}
	if !wait && time.Since(sb.failed) < retryAfter {
		return nil
	}
	run := newBuild()
	sb.build = run
	if sb.start(func(bgCtx context.Context) { sb.run(bgCtx, run) }) {
		return run
	}
	if !wait {
		sb.build = nil
		return nil
	}
	// Closed: build in this call, bounded by its ctx.
	sb.mu.Unlock()
	sb.run(ctx, run)
	sb.mu.Lock()
	return run
}

func (sb *Builder) run(ctx context.Context, run *build) {
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	dir, err := ensure(ctx, sb.root, sb.goroot, sb.env(), run.report)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (gave up after %s)", err, buildTimeout)
	}
	sb.mu.Lock()
	run.dir, run.err = dir, err
	if err == nil {
		sb.dir, sb.failed = dir, time.Time{}
	} else {
		sb.failed = time.Now()
	}
	sb.build = nil
	sb.mu.Unlock()
	close(run.done)
	took := time.Since(run.start).Round(time.Second)
	switch {
	case err == nil:
		sb.log.Info("local backend: seed build cache ready; sandboxes opened from now on start with it", "dir", dir, "took", took)
		if sb.ready != nil {
			sb.ready(dir)
		}
	case errors.Is(outer.Err(), context.Canceled):
		// Closed: what the build compiled is kept for the next one.
		sb.log.Debug("local backend: seed build cache build stopped by Close; the next backend resumes it", "after", took)
	default:
		sb.log.Warn("local backend: seed build cache not built; sandboxes open without it (their go commands compile the standard library), and a later Open or Prepare tries again",
			"err", err, "after", took)
	}
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
