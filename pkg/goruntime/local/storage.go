package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
)

// storage is what one sandbox holds besides its processes: the host uid
// it runs as (0: the caller's) and its disk (nil: plain directories).
type storage struct {
	uid  int
	disk *disk.Disk
	// leases is the directory of uid's lease (Backend.uidLeases).
	leases string
	// wrap is the command the gate runs bubblewrap under to mount a
	// memory disk first (nil: none).
	wrap []string
}

// prepareStorage makes a new sandbox's state directory l.dir and its
// writable storage (on a disk of its own, or plain directories), owned by
// a host uid of its own when the backend gives sandboxes one, with GOCACHE
// showing the seed build cache. It is part of every sandbox start, so
// whatever starts sandboxes gets the same layers. It sets l.disk.
func (b *Backend) prepareStorage(ctx context.Context, l *layout, seedDir string) (st storage, err error) {
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return st, fmt.Errorf("create sandbox directory: %w", err)
	}
	// Root-only: a sandbox's uid reaches its own directories through
	// descriptors bubblewrap is handed, never through this path.
	if err := os.Chmod(l.dir, 0o700); err != nil {
		return st, err
	}
	defer func() {
		if err != nil {
			st.release(l.dir)
		}
	}()
	st.leases = b.uidLeases()
	if b.hostUID {
		if st.uid, err = b.allocUID(l.dir); err != nil {
			return st, fmt.Errorf("local backend: %w: %w", hostLimit(err), goruntime.ErrUnavailable)
		}
	}
	var id disk.Identity
	if b.subIDs != nil {
		if id.UID, id.GID, err = b.subIDs.alloc(l.dir); err != nil {
			return st, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
		}
		st.uid = id.UID
	}
	if b.memoryDisk {
		d, wrap, err := b.prepareMemoryDisk(l, seed.WithExtra(seedDir), id)
		if err != nil {
			return st, fmt.Errorf("local backend: per-sandbox disk: %w: %w", err, goruntime.ErrUnavailable)
		}
		st.disk, st.wrap = &d, wrap
		return st, nil
	}
	if b.diskQuota {
		d, err := b.claimDisk(ctx, seed.WithExtra(seedDir), st.uid)
		if err != nil {
			return st, fmt.Errorf("local backend: per-sandbox disk: %w (relax with Options.Relax.DiskQuota): %w", hostLimit(err), goruntime.ErrUnavailable)
		}
		st.disk = &d
		l.disk = d.Dir
		// Dir()/app and friends keep working for host-side callers.
		for _, name := range []string{"app", "home", "tmp", "run", "log"} {
			if err := os.Symlink(filepath.Join(d.Dir, name), filepath.Join(l.dir, name)); err != nil {
				return st, err
			}
		}
		return st, nil
	}
	if b.hostUID && !hostuid.Reachable(b.sandboxes) {
		return st, fmt.Errorf("local backend: sandboxes run as host uids of their own, but without a disk of their own (Options.Relax.DiskQuota) "+
			"their directories under %s must be reachable by every uid, and a directory on the way is closed to others: "+
			"choose another Options.StateDir, or keep the disk quota: %w", b.sandboxes, goruntime.ErrUnavailable)
	}
	if err := os.MkdirAll(l.etc(), 0o755); err != nil {
		return st, fmt.Errorf("create sandbox directory: %w", err)
	}
	for _, d := range []string{l.app(), filepath.Dir(l.gocache()), l.tmp(), l.run()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return st, fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	if !b.claimSpare(seedDir, l.gocache()) {
		if err := seed.Populate(seedDir, l.gocache()); err != nil {
			return st, err
		}
	}
	if st.uid > 0 {
		for _, d := range []string{l.app(), l.home(), l.tmp(), l.run()} {
			if err := hostuid.Chown(d, st.uid); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// refillStorage tops up the pool Open claims storage from (ready disks,
// or pre-linked build caches). Open calls it once the sandbox is up, so
// the filler does not compete with the start it serves.
func (b *Backend) refillStorage(seedDir string) {
	if b.memoryDisk {
		return // mounting one costs no more than claiming one
	}
	if b.diskQuota {
		b.refillSpareDisks(seed.WithExtra(seedDir))
	} else {
		b.refillSpares(seedDir)
	}
}

// gateCommand is the command the gate runs bubblewrap under: setpriv to
// the sandbox's host uid with no supplementary groups (as root), and the
// mounting of a memory disk (as a user), or nothing. The gate itself
// stays the caller's until then, so the opener may set its rlimits
// (prlimit on another uid's process needs CAP_SYS_RESOURCE, which many
// root containers lack).
func (st storage) gateCommand() []string {
	if st.uid <= 0 || (st.disk != nil && st.disk.OwnIDs) {
		// A memory disk's gate becomes the sandbox's ids itself.
		return st.wrap
	}
	id := strconv.Itoa(st.uid)
	return append([]string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, st.wrap...)
}

// release unmounts and deletes the disk and ends the uid lease of the
// sandbox in dir. Its processes must be gone.
func (st storage) release(dir string) error {
	var errs []error
	if st.disk != nil {
		if err := st.disk.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox disk: %w", err))
		}
	}
	if st.leases != "" {
		hostuid.Release(st.leases, st.uid, dir)
	}
	return errors.Join(errs...)
}
