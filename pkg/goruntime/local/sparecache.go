package local

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/spares"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// Spare build caches: populating a sandbox's GOCACHE from the seed costs a
// few thousand hard links, the largest part of Open. The backend keeps a
// small pool of caches populated ahead of time (package spares) under
// StateDir/spare/<seed key>/; Open claims one with a rename (any process
// may claim any spare) and refills the pool in the background.

const spareCachesKept = 2

// A spare filler that failed waits spareRetryMin before the next, doubling
// with each failure in a row up to spareRetryMax.
const (
	spareRetryMin = time.Second
	spareRetryMax = time.Minute
)

// cacheStore is the state directory's spare build caches.
type cacheStore struct {
	state  stateDir
	logger *slog.Logger
	spares *spares.Keyed[string, string] // a pool per seed directory
}

func newCacheStore(o Options) *cacheStore {
	c := &cacheStore{state: stateDir(o.StateDir), logger: o.Logger}
	c.spares = c.newSpares()
	return c
}

// dir holds the spares linked from seedDir.
func (c *cacheStore) dir(seedDir string) string {
	// Named after the seed the spares are linked from: once the extra
	// seed is complete (seed.WithExtra), spares linked from the base alone
	// are no longer claimed.
	return c.state.spare(seed.WithExtra(seedDir))
}

// claim moves a spare cache to dst and reports whether it found one.
func (c *cacheStore) claim(seedDir, dst string) bool {
	dir := c.dir(seedDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), dst); err == nil {
			stamp := strconv.FormatInt(time.Now().Unix(), 10) + "\n"
			_ = os.WriteFile(filepath.Join(dst, "trim.txt"), []byte(stamp), 0o644)
			return true
		}
	}
	return false
}

// newSpares is the spare caches, a pool per seed directory (package
// spares): each fills a directory of caches that any process of the
// state directory may claim (claim), one cache at a time.
func (c *cacheStore) newSpares() *spares.Keyed[string, string] {
	return spares.NewKeyed(func(seedDir string) *spares.Pool[string] {
		dir := c.dir(seedDir)
		return spares.New(sharedSpares(spares.Config[string]{
			Make: func(context.Context) (string, error) {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return "", err
				}
				tmp := filepath.Join(dir, sandboxid.New()+".tmp")
				if err := seed.Populate(seedDir, tmp); err != nil {
					_ = tree.Remove(tmp)
					return "", err
				}
				return tmp, nil
			},
			Shared:  spareCacheShelf(dir),
			Discard: tree.Remove,
		}, c.logger, "fill spare build cache"))
	})
}

// sharedSpares is cfg for a pool of spares that every process of the
// state directory claims from (cfg.Shared): made one at a time, a failed
// fill waiting spareRetryMin doubling up to spareRetryMax, logged as
// what.
func sharedSpares[T any](cfg spares.Config[T], logger *slog.Logger, what string) spares.Config[T] {
	cfg.Parallel, cfg.RetryMin, cfg.RetryMax = 1, spareRetryMin, spareRetryMax
	cfg.OnError = func(err error, _ time.Duration) { logger.Debug("local backend: "+what, "err", err) }
	return cfg
}

// spareCacheShelf is a directory of spare caches: ready ones by name,
// those being filled with the suffix .tmp.
type spareCacheShelf string

func (d spareCacheShelf) Len() (int, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	ready := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			ready++
		}
	}
	return ready, err
}

// Put offers the filled cache tmp (named <id>.tmp) under its id.
func (d spareCacheShelf) Put(tmp string) error {
	return os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp"))
}

// refill tops the spare caches linked from seedDir up to
// spareCachesKept.
func (c *cacheStore) refill(seedDir string) { c.spares.Fill(seedDir, spareCachesKept) }
