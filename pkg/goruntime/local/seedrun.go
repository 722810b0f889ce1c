package local

// The seed build cache as the backend uses it: one seed.Builder per
// Backend, whose builds run in the background (background.go) and are
// shared by every caller that waits (Prepare, PrepareExtra). Open never
// waits: a sandbox opened before the seed is complete starts without it
// (seed.Builder.Current), and what waits in the warm pool and the spare
// build caches and disks is made only once it is (seedReady). What a seed
// is and how it is built: internal/seed.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
)

// Prepare builds the seed build cache if this machine has none for this Go
// installation yet (once, 1-3 minutes on 2 cores), waiting for it, so
// that the sandboxes opened after it start with the standard library
// compiled. Open does not wait for it: it starts the build in the
// background and opens its sandbox without the seed meanwhile. See seed
// for what happens when ctx ends first.
func (b *Backend) Prepare(ctx context.Context) error {
	_, err := b.seed(ctx)
	if err == nil {
		b.pool.refill()
	}
	return err
}

// PrepareExtra builds the extra seed build cache (race detector, coverage,
// test2json) now, waiting for it, after the base seed (Prepare). Open
// starts it in the background anyway once the base seed is complete; call PrepareExtra where the first
// go test -race must not compile the standard library (benchmarks, a
// server's startup). It takes about as long as the base seed again.
func (b *Backend) PrepareExtra(ctx context.Context) error {
	base, err := b.seed(ctx)
	if err != nil {
		return err
	}
	if err := b.seeds.Extra(ctx, base); err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	return nil
}

// seed returns the seed build cache's directory (seed.Builder.Dir),
// waiting for it. When ctx ends first, the error says the cache is still
// being built and wraps ctx.Err(); the build goes on, and the next call
// reuses it.
func (b *Backend) seed(ctx context.Context) (string, error) {
	dir, err := b.seeds.Dir(ctx)
	var still *seed.StillBuilding
	if errors.As(err, &still) {
		return "", fmt.Errorf("local backend: the seed Go build cache is still being built (%s so far; once per machine and Go installation, 1-3 minutes on 2 cores); "+
			"the build continues in the background, sandboxes opened meanwhile start without it, and the next Prepare will reuse it: "+
			"give Prepare a later deadline: %w", still.Elapsed.Round(time.Second), still.Err)
	}
	return dir, err
}

// seedReady is told when a seed build of this backend has completed the
// base seed at dir (seed.Builder's ready). The warm pool and the spare
// build caches or disks wait for it, and fill now: they are made only
// with the seed, so that a sandbox taken from them never lacks it (one
// started ahead without the seed would save its claimer a start of
// ~0.1 s against the seconds its go command then compiles, and take CPU
// from the seed's build and the first sandboxes' compiles). Sandboxes
// opened before keep the cache they built for themselves.
func (b *Backend) seedReady(dir string) {
	b.pool.refill()
	(storer{b}).refill(dir)
}
