package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The extra seed: the base seed build cache (seed.go) plus what go test
// -cover, go tool test2json and, when the host has a C compiler under
// /usr, go test -race compile (the race-instrumented runtime and the
// packages most tests import, built with CGO_ENABLED=1). It is built in
// the background after the base seed, so it never delays a first Open;
// once complete, new sandboxes' build caches are linked from it instead
// of the base (populateCache), and their first go test -race or -cover
// compiles only the user's code. It lives beside the base as
// seed/<key>-extra-v2-race or seed/<key>-extra-v2.

// extraSeedSuffix names the extra seed after the base seed's directory.
func extraSeedSuffix() string {
	if raceCapable() {
		return "-extra-v2-race"
	}
	return "-extra-v2"
}

// withExtra returns the extra seed of base when it is complete, else base.
func withExtra(base string) string {
	extra := base + extraSeedSuffix()
	if _, err := os.Stat(filepath.Join(extra, ".complete")); err == nil {
		return extra
	}
	return base
}

// buildExtraSeed builds the extra seed once per Backend, in the
// background, after the base seed is ready. Failures are logged: sandboxes
// keep using the base seed.
func (b *Backend) buildExtraSeed(base string) {
	if withExtra(base) != base || !b.extraStarted.CompareAndSwap(false, true) {
		return
	}
	started := b.bg.start(func(bgCtx context.Context) {
		ctx, cancel := context.WithTimeout(bgCtx, seedBuildTimeout)
		defer cancel()
		start := time.Now()
		dir, err := ensureSeedExtra(ctx, b.opts.StateDir, b.goroot, b.seedEnv())
		if err != nil && bgCtx.Err() != nil {
			// Close: what the build compiled is kept for the next one.
			b.opts.Logger.Debug("local backend: extra seed build cache paused by Close; the next backend resumes it", "after", time.Since(start).Round(time.Second))
			return
		}
		if err != nil {
			b.opts.Logger.Warn("local backend: extra seed build cache (race, cover) not built; go test -race and -cover compile the standard library on first use",
				"err", fmt.Errorf("%w (after %s)", err, time.Since(start).Round(time.Second)))
			b.extraStarted.Store(false) // the next Open retries
			return
		}
		b.opts.Logger.Debug("local backend: extra seed build cache ready", "dir", dir, "took", time.Since(start).Round(time.Second))
	})
	if !started {
		b.extraStarted.Store(false)
	}
}

// PrepareExtra builds the extra seed build cache (race detector, coverage,
// test2json) now, waiting for it, after the base seed (Prepare). Open
// starts it in the background anyway; call PrepareExtra where the first
// go test -race must not compile the standard library (benchmarks, a
// server's startup). It takes about as long as the base seed again.
func (b *Backend) PrepareExtra(ctx context.Context) error {
	base, err := b.seed(ctx)
	if err != nil {
		return err
	}
	if withExtra(base) != base {
		return nil
	}
	if _, err := ensureSeedExtra(ctx, b.opts.StateDir, b.goroot, b.seedEnv()); err != nil {
		return fmt.Errorf("local backend: build the extra seed build cache: %w", err)
	}
	return nil
}

// claimableSeed reports whether spares linked from the seed directory
// named name (under StateDir/seed) are still claimed: it is complete, and
// it is what withExtra picks for its base seed (the current extra seed
// once that is complete, else the base).
func (b *Backend) claimableSeed(name string) bool {
	if name == "" || name != filepath.Base(name) {
		return false
	}
	sd := stateDir(b.opts.StateDir)
	if _, err := os.Stat(filepath.Join(sd.seed(name), ".complete")); err != nil {
		return false
	}
	base := strings.TrimSuffix(name, extraSeedSuffix())
	if base != name {
		return true // the current kind of extra seed, complete
	}
	if strings.Contains(name, "-extra-") {
		return false // an extra seed of an older kind
	}
	return withExtra(sd.seed(name)) == sd.seed(name)
}
