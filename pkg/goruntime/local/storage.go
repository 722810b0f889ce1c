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
	// leases is the directory of uid's lease (host.uidLeases).
	leases string
	// memory is the memory disk the gate mounts before it becomes
	// bubblewrap, in the user namespace ns (nil: none).
	memory *gate.Disk
	ns     *gate.UserNS
}

// storer is the backend's storage work: a new sandbox's writable
// storage (a disk of its own, a memory disk or plain directories) and
// the spares it is claimed from (sparedisk.go, sparecache.go).
type storer struct{ b *Backend }

// prepare makes a new sandbox's state directory l.dir and its
// writable storage (on a disk of its own, or plain directories), owned by
// a host uid of its own when the backend gives sandboxes one, with GOCACHE
// showing the seed build cache, or, for a sandbox made from a snapshot
// (ctx from withLower), layered over it. It is part of every sandbox
// start, so whatever starts sandboxes gets the same layers. It sets
// l.disk.
func (s storer) prepare(ctx context.Context, l *layout, seedDir string) (st storage, err error) {
	b := s.b
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
	st.leases = b.host.uidLeases()
	if b.host.hostUID {
		if st.uid, err = b.host.allocUID(l.dir); err != nil {
			return st, fmt.Errorf("local backend: %w: %w", hostLimit(err), goruntime.ErrUnavailable)
		}
	}
	var id disk.Identity
	if b.host.subIDs != nil {
		uid, gid, err := b.host.subIDs.alloc(l.dir)
		if err != nil {
			return st, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
		}
		id, st.uid = b.host.subIDs.identity(uid, gid), uid
	}
	if b.host.memoryDisk {
		d, g, ns, err := s.memoryDisk(l, seed.WithExtra(seedDir), id)
		if err != nil {
			return st, fmt.Errorf("local backend: per-sandbox disk: %w: %w", err, goruntime.ErrUnavailable)
		}
		st.disk, st.memory, st.ns = &d, g, ns
		return st, nil
	}
	if b.host.diskQuota {
		err = s.onDisk(ctx, l, seedDir, &st)
		return st, err
	}
	err = s.plain(l, seedDir, st.uid)
	return st, err
}

// onDisk gives a sandbox of the backend's disk quota its disk of
// its own (spare disks, sparedisk.go), layered on the snapshot it is
// made from if any (snapcow.go), and the links host-side callers reach
// its directories by. It sets st.disk and l.disk.
func (s storer) onDisk(ctx context.Context, l *layout, seedDir string, st *storage) error {
	b := s.b
	d, err := b.disks.claim(ctx, seed.WithExtra(seedDir), st.uid)
	if err != nil {
		return fmt.Errorf("local backend: per-sandbox disk: %w (relax with Options.Relax.DiskQuota): %w", hostLimit(err), goruntime.ErrUnavailable)
	}
	st.disk = &d
	l.disk = d.Dir
	if m, ok := lowerOf(ctx); ok { // a sandbox made from a snapshot (snapcow.go)
		if err := b.snap().layerDisk(&d, m, l, st.uid, seed.WithExtra(seedDir)); err != nil {
			return fmt.Errorf("local backend: %w", err)
		}
	}
	// Dir()/app and friends keep working for host-side callers
	// (seeDisk points them at the disk once it left the host).
	for _, name := range l.diskLinks() {
		if err := os.Symlink(filepath.Join(d.Dir, name), filepath.Join(l.dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// plain makes a sandbox's directories without a disk of its own
// (Options.Relax.DiskQuota), its build cache showing the seed, owned by
// uid when the sandbox has a host uid of its own (uid > 0).
func (s storer) plain(l *layout, seedDir string, uid int) error {
	b := s.b
	if b.host.hostUID && !hostuid.Reachable(b.sandboxes) {
		return fmt.Errorf("local backend: sandboxes run as host uids of their own, but without a disk of their own (Options.Relax.DiskQuota) "+
			"their directories under %s must be reachable by every uid, and a directory on the way is closed to others: "+
			"choose another Options.StateDir, or keep the disk quota: %w", b.sandboxes, goruntime.ErrUnavailable)
	}
	if err := os.MkdirAll(l.etc(), 0o755); err != nil {
		return fmt.Errorf("create sandbox directory: %w", err)
	}
	for _, d := range []string{l.app(), filepath.Dir(l.gocache()), l.tmp(), l.run()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	if !b.caches.claim(seedDir, l.gocache()) {
		if err := seed.Populate(seedDir, l.gocache()); err != nil {
			return err
		}
	}
	if uid > 0 {
		for _, d := range []string{l.app(), l.home(), l.tmp(), l.run()} {
			if err := hostuid.Chown(d, uid); err != nil {
				return err
			}
		}
	}
	return nil
}

// refill tops up the pool Open claims storage from (ready disks,
// or pre-linked build caches). Open calls it once the sandbox is up, so
// the filler does not compete with the start it serves.
func (s storer) refill(seedDir string) {
	b := s.b
	if b.host.memoryDisk {
		return // mounting one costs no more than claiming one
	}
	if b.host.diskQuota {
		b.disks.refill(seed.WithExtra(seedDir))
	} else {
		b.caches.refill(seedDir)
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

// Memory disks (internal/disk's memory.go): the disk quota of a backend
// that is not root. The sandbox's gate mounts a tmpfs of Options.DiskBytes
// and Options.DiskInodes in a user and mount namespace of its own and
// only then becomes bubblewrap; this process reaches the disk through
// /proc/<bubblewrap's pid>/root (layout.view, seeDisk).

// gatePATH is the PATH the gate (package gate), and so bubblewrap, run
// with, and where the gate's helpers are found (newuidmap, newgidmap).
const gatePATH = "/usr/bin:/bin"

// gateEnv is the environment the gate, and so bubblewrap, run with.
func gateEnv() []string { return []string{"PATH=" + gatePATH} }

// usesMemoryDisk reports whether sandboxes under o get a memory disk: a
// disk quota is kept (not relaxed) by a backend that is not root.
func (o Options) usesMemoryDisk() bool { return os.Geteuid() != 0 && !o.Relax.DiskQuota }

// memoryDiskLayout is what a memory disk holds: layout's writable
// directories (relative to the disk's root), GOCACHE among them. The etc
// and log directories stay on the host (layout.etc, layout.logDir).
func memoryDiskLayout() disk.Layout {
	var l layout // relative paths: no dir, no disk
	return disk.Layout{
		Dirs:  []string{l.app(), l.home(), filepath.Dir(l.gocache()), l.gocache(), l.tmp(), l.run()},
		Cache: l.gocache(),
	}
}

// memoryDisk lays out the host side of a memory disk for the
// sandbox in l (its mount point, etc and log directories) and returns the
// disk, what the gate does to mount it and the user namespace it does
// that in. A
// sandbox with host ids of its own (id, idleases.go) mounts its disk on the
// user's shared mount point, which those ids reach, and gets what they
// cannot reach staged on it.
func (s storer) memoryDisk(l *layout, seed string, id disk.Identity) (disk.Disk, *gate.Disk, *gate.UserNS, error) {
	b := s.b
	d := disk.Memory(filepath.Join(l.dir, "disk"))
	dirs := []string{d.Dir, filepath.Join(l.dir, "etc"), filepath.Join(l.dir, "log")}
	if id.UID > 0 {
		d = disk.Memory(b.host.subIDs.diskDir())
		d.OwnIDs = true
		dirs = dirs[1:]
	}
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return d, nil, nil, fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	l.memory, l.disk, l.ownIDs = true, d.Dir, d.OwnIDs
	if d.OwnIDs {
		// Its passwd, group and hosts files are read by the sandbox's
		// ids, through their staging.
		if err := os.Chmod(l.etc(), 0o755); err != nil {
			return d, nil, nil, err
		}
		id.Stage = b.host.stageForOwnIDs(l, d)
	}
	sp := disk.Spec{Bytes: b.opts.DiskBytes, Inodes: b.opts.DiskInodes, Seed: seed, Layout: memoryDiskLayout()}
	g, ns, err := disk.MemoryPlan(d, sp, id)
	if err != nil {
		return d, nil, nil, err
	}
	return d, &g, ns, nil
}

// memoryDiskProblem says why memory disks cannot be had here, or "",
// trying one with the gate gateExe (the runtime server binary; "": none
// was found).
func memoryDiskProblem(ctx context.Context, gateExe string) (detail, fix string) {
	err := disk.TryMemory(ctx, gateExe, gateEnv(), MinDiskBytes, MinDiskInodes, disk.Identity{})
	if errors.Is(err, disk.ErrNoGate) {
		return err.Error(), serverBinaryFix
	}
	if err != nil {
		return err.Error(), "a kernel that lets users mount tmpfs and overlayfs in their own user namespaces (Linux 5.11 or later, unprivileged user namespaces enabled), or run as root, or relax it (Options.Relax.DiskQuota)"
	}
	return "", ""
}
