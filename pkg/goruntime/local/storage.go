package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
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
	// memory is the memory disk the gate mounts before it becomes
	// bubblewrap, in the user namespace ns (nil: none).
	memory *gate.Disk
	ns     *gate.UserNS
}

// prepareStorage makes a new sandbox's state directory l.dir and its
// writable storage (on a disk of its own, or plain directories), owned by
// a host uid of its own when the backend gives sandboxes one, with GOCACHE
// showing the seed build cache, or, for a sandbox made from a snapshot
// (ctx from withLower), layered over it. It is part of every sandbox
// start, so whatever starts sandboxes gets the same layers. It sets
// l.disk.
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
		uid, gid, err := b.subIDs.alloc(l.dir)
		if err != nil {
			return st, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
		}
		id, st.uid = b.subIDs.identity(uid, gid), uid
	}
	if b.memoryDisk {
		d, g, ns, err := b.prepareMemoryDisk(l, seed.WithExtra(seedDir), id)
		if err != nil {
			return st, fmt.Errorf("local backend: per-sandbox disk: %w: %w", err, goruntime.ErrUnavailable)
		}
		st.disk, st.memory, st.ns = &d, g, ns
		return st, nil
	}
	if b.diskQuota {
		d, err := b.claimDisk(ctx, seed.WithExtra(seedDir), st.uid)
		if err != nil {
			return st, fmt.Errorf("local backend: per-sandbox disk: %w (relax with Options.Relax.DiskQuota): %w", hostLimit(err), goruntime.ErrUnavailable)
		}
		st.disk = &d
		l.disk = d.Dir
		if m, ok := lowerOf(ctx); ok { // a sandbox made from a snapshot (snapcow.go)
			if err := b.layerDisk(&d, m, l, st.uid, seed.WithExtra(seedDir)); err != nil {
				return st, fmt.Errorf("local backend: %w", err)
			}
		}
		// Dir()/app and friends keep working for host-side callers
		// (seeDisk points them at the disk once it left the host).
		for _, name := range l.diskLinks() {
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

// gateIDs are the ids the gate takes before it becomes bubblewrap: the
// sandbox's host uid (as root; its gid is the same number), the id
// subordinate ids are mapped to in a memory disk's user namespace, or
// none (0, 0): the caller's.
func (st storage) gateIDs() (uid, gid int) {
	if st.ns == nil && st.uid > 0 {
		return st.uid, st.uid
	}
	return st.ns.Takes()
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

// diskLinks are the names in a sandbox directory that link to its disk,
// for host-side callers of Sandbox.Dir: a memory disk's log stays on the
// host (layout.logDir).
func (l layout) diskLinks() []string {
	if l.memory {
		return []string{"app", "home", "tmp", "run"}
	}
	return []string{"app", "home", "tmp", "run", "log"}
}

// seeDisk points l at the disk of the sandbox whose bubblewrap runs as
// pid, whose mounts are in that process's mount namespace (a memory
// disk's always, another's once it leaves the host: disk.LeaveHost),
// and links the sandbox directory's diskLinks there.
func seeDisk(l *layout, pid int) {
	l.view = "/proc/" + strconv.Itoa(pid) + "/root"
	for _, name := range l.diskLinks() {
		link := filepath.Join(l.dir, name)
		_ = os.Remove(link)
		_ = os.Symlink(l.view+filepath.Join(l.disk, name), link)
	}
}
