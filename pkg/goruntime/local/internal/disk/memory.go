package disk

// Memory disks: the disk quota for a backend that is not root. A user
// cannot mount a file system where the host sees it, but may in a user
// and mount namespace of its own. So the sandbox's gate (the process that
// becomes bubblewrap) first enters a new user namespace (the caller as
// its root) and mount namespace (unshare(1)), mounts a tmpfs of
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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// memoryScript runs as root of the gate's new user namespace, in its new
// mount namespace: $1 the disk directory, $2 the tmpfs's options, $3 the
// seed, $4 the overlay's upper and $5 work directory and $6 the cache
// (all three relative to the disk), $7 the build cache's trim stamp, $8
// the directories to make on the disk (relative, parents first, one per
// line: a single mkdir); then the command to become. Every mount is
// nosuid,nodev; everything on the disk is the namespace root's, which is
// the caller's uid and the sandbox's.
const memoryScript = `set -euf
d=$1 tmpfs=$2 seed=$3 upper=$4 work=$5 cache=$6 stamp=$7 dirs=$8
shift 8
mount -t tmpfs -o "nosuid,nodev,mode=0700,$tmpfs" sandbox-disk "$d"
cd "$d"
IFS='
'
mkdir -m 0700 $dirs
mount -t overlay -o "nosuid,nodev,lowerdir=$seed,upperdir=$d/$upper,workdir=$d/$work" sandbox-cache "$cache"
echo "$stamp" >"$cache/trim.txt"
cd /
exec "$@"`

// MemoryCommand is the command that makes memory disk d (Spec's Bytes,
// Inodes, Seed and Layout: Public and Owned do not apply, everything on
// it is the sandbox's) and then runs the command after it in the same
// namespaces: unshare(1) as the caller, then the script, each found in
// the caller's PATH. The seed must be readable by the caller.
func MemoryCommand(d Disk, sp Spec) ([]string, error) {
	for _, p := range []string{sp.Seed, d.Dir} {
		if err := overlayPath(p); err != nil {
			return nil, err
		}
	}
	dirs := append([]string{}, sp.Layout.Dirs...)
	dirs = append(dirs, overlayDir, overlayUpper, overlayWork)
	for _, sub := range cacheSubdirs() {
		// The seed's directories are read-only: an upper directory of the
		// same name makes the merged one writable (see Make).
		dirs = append(dirs, filepath.Join(overlayUpper, sub))
	}
	return []string{"unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", memoryScript, "sandbox-disk",
		d.Dir, fmt.Sprintf("size=%d,nr_inodes=%d", sp.Bytes, sp.Inodes), sp.Seed, overlayUpper, overlayWork, sp.Layout.Cache,
		strconv.FormatInt(time.Now().Unix(), 10), strings.Join(dirs, "\n")}, nil
}

// Memory is the memory disk whose mount point (made by the caller, empty
// on the host) is dir.
func Memory(dir string) Disk { return Disk{Dir: dir, Memory: true} }

// Through returns d as the host reaches it through root, the root
// directory of a process in the sandbox's outer mount namespace
// (/proc/<pid>/root): a memory disk's mounts are only there. Other disks
// are returned as they are.
func (d Disk) Through(root string) Disk {
	if d.Memory {
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

// TryMemory makes a memory disk of bytes and inodes with a build cache
// overlay in a temporary directory, as MemoryCommand would with PATH
// path, and runs /bin/true on it, to tell whether memory disks can be had
// here.
func TryMemory(ctx context.Context, path string, bytes, inodes int64) error {
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
	sp := Spec{Bytes: bytes, Inodes: inodes, Seed: seed, Layout: Layout{Dirs: []string{"cache"}, Cache: "cache"}}
	a, err := MemoryCommand(Memory(mnt), sp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `exec "$@"`, "sandbox-gate"}, append(a, "/bin/true")...)...)
	cmd.Env = []string{"PATH=" + path}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mount a tmpfs and an overlay in a user and mount namespace of our own (unshare --user --map-root-user --mount): %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
