package local

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
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

func (b *Backend) spareDir(seedDir string) string {
	// Named after the seed the spares are linked from: once the extra
	// seed is complete (seed.WithExtra), spares linked from the base alone
	// are no longer claimed.
	return stateDir(b.opts.StateDir).spare(seed.WithExtra(seedDir))
}

// claimSpare moves a spare cache to dst and reports whether it found one.
func (b *Backend) claimSpare(seedDir, dst string) bool {
	dir := b.spareDir(seedDir)
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

// newSpareCaches is the backend's spare caches, a pool per seed
// directory (package spares): each fills a directory of caches that any
// process of the state directory may claim (claimSpare), one cache at a
// time.
func (b *Backend) newSpareCaches() *spares.Keyed[string, string] {
	return spares.NewKeyed(func(seedDir string) *spares.Pool[string] {
		dir := b.spareDir(seedDir)
		return spares.New(spares.Config[string]{
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
			Shared:   spareCacheShelf(dir),
			Discard:  tree.Remove,
			Parallel: 1,
			RetryMin: spareRetryMin,
			RetryMax: spareRetryMax,
			OnError: func(err error, _ time.Duration) {
				b.opts.Logger.Debug("local backend: fill spare build cache", "err", err)
			},
		})
	})
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

// refillSpares tops the spare caches linked from seedDir up to
// spareCachesKept.
func (b *Backend) refillSpares(seedDir string) { b.spareCaches.Fill(seedDir, spareCachesKept) }

// trash moves dir out of the way at once and deletes it in the background.
func (b *Backend) trash(dir string) error {
	t := stateDir(b.opts.StateDir).trash()
	if err := os.MkdirAll(t, 0o700); err != nil {
		return tree.Remove(dir)
	}
	dst := filepath.Join(t, filepath.Base(dir)+"-"+sandboxid.New())
	if err := os.Rename(dir, dst); err != nil {
		return tree.Remove(dir)
	}
	if !b.bg.start(func(context.Context) { _ = tree.Remove(dst) }) {
		return tree.Remove(dst)
	}
	return nil
}

// prune removes what dead sandboxes left behind (their process is gone but
// Close never ran: the opener crashed or exited), old trash, spares no
// backend will claim (of a seed that is gone or superseded) and the host
// leftovers of sandboxes that no longer exist (cgroups.PruneLeftovers,
// hostuid.PruneLeases). Run in the background by New.
func (b *Backend) prune(ctx context.Context) {
	_ = ctx
	if entries, err := os.ReadDir(stateDir(b.opts.StateDir).trash()); err == nil {
		for _, e := range entries {
			_ = tree.Remove(filepath.Join(stateDir(b.opts.StateDir).trash(), e.Name()))
		}
	}
	for _, d := range []string{stateDir(b.opts.StateDir).spareRoot()} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			group := filepath.Join(d, e.Name())
			claimable := seed.Claimable(stateDir(b.opts.StateDir).seedRoot(), e.Name())
			sub, _ := os.ReadDir(group)
			for _, s := range sub {
				p := filepath.Join(group, s.Name())
				switch info, err := s.Info(); {
				case err != nil:
				case strings.HasSuffix(s.Name(), ".tmp"):
					// From a filler that died (or, if young, still fills).
					if time.Since(info.ModTime()) > time.Hour {
						_ = tree.Remove(p)
					}
				case !claimable:
					// Linked from a seed that is gone or superseded: no
					// Open claims it. Moving it away is the claim, as in
					// claimSpare, so a claimer never gets a half-removed one.
					dst := filepath.Join(stateDir(b.opts.StateDir).trash(), "spare-"+s.Name())
					if os.MkdirAll(filepath.Dir(dst), 0o700) == nil && os.Rename(p, dst) == nil {
						_ = tree.Remove(dst)
					}
				}
			}
			if !claimable {
				_ = os.Remove(group) // fails while a .tmp is in it
			}
		}
	}
	disk.PruneOrphans(diskMounts)
	disk.PruneTemplateBuilds(stateDir(b.opts.StateDir).disks())
	cgroups.PruneLeftovers(b.sandboxes)
	live := map[string]bool{}
	// After the sandboxes below: a half-made one removed there (its
	// opener died before it wrote its state file) leaves a lease whose
	// directory is gone, freed here in the same prune.
	defer func() { hostuid.PruneLeases(hostUIDDir); b.pruneDisks(live) }()
	entries, err := os.ReadDir(b.sandboxes)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !sandboxid.Valid(e.Name()) {
			continue
		}
		l := layout{dir: filepath.Join(b.sandboxes, e.Name())}
		data, err := os.ReadFile(l.meta())
		if err != nil {
			// Still opening (no state file yet) unless it is old.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 10*time.Minute {
				_ = tree.Remove(l.dir)
			}
			continue
		}
		var m meta
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if procfs.Alive(m.PID, m.StartTime) {
			if m.Disk != nil {
				live[m.Disk.ID()] = true
			}
			continue
		}
		_ = m.Cgroup.Remove()
		_ = (storage{uid: m.HostUID, disk: m.Disk, leases: b.uidLeases()}).release(l.dir)
		_ = tree.Remove(l.dir)
	}
}
