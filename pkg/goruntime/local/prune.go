package local

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// What a backend removes in the background: what dead sandboxes and
// older versions left in the state directory (prune), and directories
// moved out of the way (trash).

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
					// cacheStore.claim, so a claimer never gets a half-removed one.
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
	defer func() { hostuid.PruneLeases(hostUIDDir); b.disks.prune(live) }()
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
		_ = (storage{uid: m.HostUID, disk: m.Disk, leases: b.host.uidLeases()}).release(l.dir)
		_ = tree.Remove(l.dir)
	}
}
