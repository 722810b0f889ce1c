package local

// Memory disks (internal/disk's memory.go): the disk quota of a backend
// that is not root. The sandbox's gate mounts a tmpfs of Options.DiskBytes
// and Options.DiskInodes in a user and mount namespace of its own and
// only then becomes bubblewrap; this process reaches the disk through
// /proc/<bubblewrap's pid>/root (layout.view, seeDisk).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

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

// prepareMemoryDisk lays out the host side of a memory disk for the
// sandbox in l (its mount point, etc and log directories) and returns the
// disk, what the gate does to mount it and the user namespace it does
// that in. A
// sandbox with host ids of its own (id, subids.go) mounts its disk on the
// user's shared mount point, which those ids reach, and gets what they
// cannot reach staged on it.
func (b *Backend) prepareMemoryDisk(l *layout, seed string, id disk.Identity) (disk.Disk, *gate.Disk, *gate.UserNS, error) {
	d := disk.Memory(filepath.Join(l.dir, "disk"))
	dirs := []string{d.Dir, filepath.Join(l.dir, "etc"), filepath.Join(l.dir, "log")}
	if id.UID > 0 {
		d = disk.Memory(b.subIDs.diskDir())
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
		id.Stage = b.stageForOwnIDs(l, d)
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
