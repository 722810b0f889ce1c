package disk

// Memory disks: the disk quota for a backend that is not root. A user
// cannot mount a file system where the host sees it, but may in a user
// and mount namespace of its own. So the sandbox's gate (package gate:
// the process that becomes bubblewrap) starts in a new user namespace
// (the caller as its root) and mount namespace, mounts a tmpfs of
// Spec.Bytes bytes and Spec.Inodes inodes on the sandbox's disk
// directory there, lays the Layout out on it, mounts the seed's overlay
// on Layout.Cache, and only then becomes bubblewrap, whose binds of the
// disk's directories resolve in that namespace. Nobody else sees the
// mounts: they live exactly as long as the sandbox's processes, and the
// host reaches them through /proc/<bubblewrap's pid>/root (Through).
//
// The tmpfs's pages are charged to the memory cgroup of whoever writes
// them, the sandbox: the backend raises the sandbox's memory limit by the
// disk's size, so that a full disk leaves its processes the memory limit
// they were promised, and a disk fill ends at the tmpfs's size with
// ENOSPC (disk_limit), never at the memory limit. What the disk holds
// costs the host memory, not disk space; docs/local-backend.md says why
// that is the right trade for a backend without root.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
)

// InnerID is the uid and gid inside the gate's user namespace that a
// sandbox with host ids of its own runs as (bubblewrap maps the
// sandbox's own uid to it).
const InnerID = 1000

// Identity is whom a memory disk's sandbox runs as on the host: the
// caller (the zero Identity), or host ids of its own, UID and GID
// (subordinate ids of the caller's, which newuidmap and newgidmap map
// to InnerID in the gate's user namespace).
type Identity struct {
	UID, GID int
	// NewUIDMap and NewGIDMap are the setuid helpers that map UID and GID
	// into the gate's user namespace (gate.Map).
	NewUIDMap, NewGIDMap string
	// Stage lists paths the sandbox's ids cannot reach on the host (a
	// directory on the way is closed to others) that bubblewrap binds:
	// each is bound onto the disk first, at StagePath.
	Stage []Staged
}

// Staged is a path bound onto a memory disk: Src on the host at Name in
// the disk's StageDir.
type Staged struct{ Src, Name string }

// StageDir is the directory of a memory disk that holds its stagings.
const StageDir = ".stage"

// HostDir is the directory of a memory disk for a sandbox with ids of its
// own that the caller keeps (the sandbox's ids may enter it, not write
// it): the host's sockets for the sandbox go there.
const HostDir = ".host"

// StagePath is where staging name is on memory disk d.
func (d Disk) StagePath(name string) string { return filepath.Join(d.Dir, StageDir, name) }

func (id Identity) own() bool { return id.UID > 0 }

// MemoryPlan is what the gate (package gate) does to make memory disk d
// (Spec's Bytes, Inodes, Seed and Layout: Public and Owned do not apply)
// for a sandbox of identity id, and the user namespace it does it in.
// The seed must be readable by the caller and, for a sandbox with ids of
// its own, its files by everyone (they are). Without ids of its own
// everything on the disk is the namespace root's, the caller's uid and
// the sandbox's; with them the Layout's directories are the sandbox's,
// and the disk's root and the overlay's work directory stay the
// caller's, and the gate takes the sandbox's ids (InnerID) before it
// becomes bubblewrap.
func MemoryPlan(d Disk, sp Spec, id Identity) (gate.Disk, *gate.UserNS, error) {
	for _, p := range []string{sp.Seed, d.Dir} {
		if err := overlayPath(p); err != nil {
			return gate.Disk{}, nil, err
		}
	}
	g := gate.Disk{
		Dir:     d.Dir,
		Options: fmt.Sprintf("size=%d,nr_inodes=%d", sp.Bytes, sp.Inodes),
		Mode:    0o700,
		Dirs:    append(append([]string{}, sp.Layout.Dirs...), overlayDir, overlayUpper, overlayWork),
		Overlay: gate.Overlay{Lower: sp.Seed, Upper: overlayUpper, Work: overlayWork, Target: sp.Layout.Cache},
		// The build cache's trim stamp: go trims the cache at most once a
		// day from it, and the seed's is as old as the seed.
		Files: []gate.File{{Name: filepath.Join(sp.Layout.Cache, "trim.txt"), Data: strconv.FormatInt(time.Now().Unix(), 10) + "\n"}},
	}
	own := append(append([]string{}, sp.Layout.Dirs...), overlayUpper)
	for _, sub := range cacheSubdirs() {
		// The seed's directories are read-only: an upper directory of the
		// same name makes the merged one writable (see Make).
		g.Dirs = append(g.Dirs, filepath.Join(overlayUpper, sub))
		own = append(own, filepath.Join(overlayUpper, sub))
	}
	ns := &gate.UserNS{UID: os.Getuid(), GID: os.Getgid()}
	if !id.own() {
		return g, ns, nil
	}
	// Others (the sandbox's ids) may enter the disk's directories, not
	// list them; only the caller's processes reach the disk at all
	// (through /proc/<pid>/root).
	g.Mode, g.Owner, g.Own = 0o711, InnerID, own
	ns.Sub, ns.Inner = &gate.IDs{UID: id.UID, GID: id.GID}, InnerID
	ns.NewUIDMap, ns.NewGIDMap = id.NewUIDMap, id.NewGIDMap
	g.Dirs = append(g.Dirs, HostDir)
	if len(id.Stage) > 0 {
		g.Dirs = append(g.Dirs, StageDir)
	}
	for _, s := range id.Stage {
		name := filepath.Join(StageDir, s.Name)
		if s.Name != filepath.Base(s.Name) || !filepath.IsLocal(s.Name) {
			return gate.Disk{}, nil, fmt.Errorf("cannot stage %q as %q on a memory disk: a name that is not one plain element", s.Src, s.Name)
		}
		if fi, err := os.Stat(s.Src); err == nil && fi.IsDir() {
			g.Dirs = append(g.Dirs, name)
		}
		g.Binds = append(g.Binds, gate.Bind{Src: s.Src, Name: name})
	}
	return g, ns, nil
}

// Memory is the memory disk whose mount point (made by the caller, empty
// on the host) is dir.
func Memory(dir string) Disk { return Disk{Dir: dir, Memory: true} }

// Through returns d as the host reaches it through root, the root
// directory of a process in the sandbox's outer mount namespace
// (/proc/<pid>/root), where the mounts of a disk InSandboxNS are. Other
// disks are returned as they are.
func (d Disk) Through(root string) Disk {
	if d.InSandboxNS() {
		d.Dir = root + d.Dir
	}
	return d
}

// overlayPath refuses a path (the seed, a memory disk's) overlayfs's
// options cannot carry.
func overlayPath(p string) error {
	if strings.ContainsAny(p, ",:\\") {
		return fmt.Errorf("path %s holds a character overlayfs options cannot carry (, : or \\): set Options.StateDir to a plainer path", p)
	}
	return nil
}

// TryMemory makes a memory disk of size bytes and inodes inodes with a build cache
// overlay in a temporary directory for a sandbox of identity id (its
// Stage ignored), as a sandbox's gate would, with the gate exe (a runtime
// server binary) and the environment env, and runs /bin/true on it, to
// tell whether memory disks can be had here.
func TryMemory(ctx context.Context, exe string, env []string, size, inodes int64, id Identity) error {
	if exe == "" {
		return ErrNoGate
	}
	dir, err := os.MkdirTemp("", "sandbox-check-")
	if err != nil {
		return fmt.Errorf("try a memory disk: %w", err)
	}
	defer os.RemoveAll(dir)
	seed, mnt := filepath.Join(dir, "seed"), filepath.Join(dir, "disk")
	for _, p := range []string{seed, mnt} {
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("try a memory disk: %w", err)
		}
	}
	sp := Spec{Bytes: size, Inodes: inodes, Seed: seed, Layout: Layout{Dirs: []string{"cache"}, Cache: "cache"}}
	id.Stage = nil
	g, ns, err := MemoryPlan(Memory(mnt), sp, id)
	if err != nil {
		return err
	}
	what := "mount a tmpfs and an overlay in a user and mount namespace of our own"
	if id.own() {
		what = fmt.Sprintf("map uid %d and gid %d into a user namespace of our own (newuidmap, newgidmap) and mount a tmpfs and an overlay in it", id.UID, id.GID)
	}
	if _, err := onMemoryDisk(ctx, exe, env, g, ns, "/bin/true"); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ErrNoGate is TryMemory's answer without a gate to try with.
var ErrNoGate = errors.New("no runtime server binary to run the sandbox's gate")

// onMemoryDisk runs a gate, exe with the environment env, that mounts g
// in ns and becomes command, and returns command's output (and the
// gate's). It gives up after 30 seconds.
func onMemoryDisk(ctx context.Context, exe string, env []string, g gate.Disk, ns *gate.UserNS, command ...string) ([]byte, error) {
	p := gate.Plan{Disk: &g, Command: command}
	p.UID, p.GID = ns.Takes()
	return gate.Run(ctx, exe, p, ns, env)
}
