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
// line: a single mkdir), $9 their mode; then, after "--", $own the
// directories to give to the sandbox's own uid and $binds the paths to
// bind onto the disk ("source<TAB>name" a line), both empty unless the
// sandbox has host ids of its own (Identity), and the command to become.
// Every mount is nosuid,nodev. With host ids of its own the command
// becomes the namespace's uid and gid 1000 (the sandbox's host ids)
// before it runs; else it stays the namespace root, the caller's uid.
const memoryScript = `set -euf
d=$1 tmpfs=$2 seed=$3 upper=$4 work=$5 cache=$6 stamp=$7 dirs=$8 mode=$9
shift 10
own=$1 binds=$2
shift 2
mount -t tmpfs -o "nosuid,nodev,mode=$mode,$tmpfs" sandbox-disk "$d"
cd "$d"
IFS='
'
mkdir -m "$mode" $dirs
mount -t overlay -o "nosuid,nodev,lowerdir=$seed,upperdir=$d/$upper,workdir=$d/$work" sandbox-cache "$cache"
echo "$stamp" >"$cache/trim.txt"
if [ -z "$own" ]; then
	cd /
	exec "$@"
fi
chown 1000:1000 $own "$cache/trim.txt"
for b in $binds; do
	src=${b%%	*} name=${b#*	}
	[ -d "$src" ] || : >"$name"
	mount --bind "$src" "$d/$name"
done
cd /
exec setpriv --reuid=1000 --regid=1000 --clear-groups -- "$@"`

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

// MemoryCommand is the command that makes memory disk d (Spec's Bytes,
// Inodes, Seed and Layout: Public and Owned do not apply) for a sandbox
// of identity id and then runs the command after it in the same
// namespaces: unshare(1) as the caller, then the script, each found in
// the caller's PATH. The seed must be readable by the caller and, for a
// sandbox with ids of its own, its files by everyone (they are).
// Without ids of its own everything on the disk is the namespace root's,
// the caller's uid and the sandbox's; with them the Layout's directories
// are the sandbox's, and the disk's root and the overlay's work directory
// stay the caller's.
func MemoryCommand(d Disk, sp Spec, id Identity) ([]string, error) {
	for _, p := range []string{sp.Seed, d.Dir} {
		if err := overlayPath(p); err != nil {
			return nil, err
		}
	}
	dirs := append([]string{}, sp.Layout.Dirs...)
	own := append([]string{}, sp.Layout.Dirs...)
	dirs = append(dirs, overlayDir, overlayUpper, overlayWork)
	own = append(own, overlayUpper)
	for _, sub := range cacheSubdirs() {
		// The seed's directories are read-only: an upper directory of the
		// same name makes the merged one writable (see Make).
		dirs = append(dirs, filepath.Join(overlayUpper, sub))
		own = append(own, filepath.Join(overlayUpper, sub))
	}
	unshare := []string{"unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"}
	mode, binds := "0700", []string{}
	if id.own() {
		// Others (the sandbox's ids) may enter the disk's directories,
		// not list them; only the caller's processes reach the disk at
		// all (through /proc/<pid>/root).
		mode = "0711"
		unshare = append(unshare, fmt.Sprintf("--map-users=%d,%d,1", id.UID, InnerID), fmt.Sprintf("--map-groups=%d,%d,1", id.GID, InnerID))
		dirs = append(dirs, HostDir)
		if len(id.Stage) > 0 {
			dirs = append(dirs, StageDir)
		}
		for _, s := range id.Stage {
			name := filepath.Join(StageDir, s.Name)
			if strings.ContainsAny(s.Src, "\t\n") || s.Name != filepath.Base(s.Name) || !filepath.IsLocal(s.Name) {
				return nil, fmt.Errorf("cannot stage %q as %q on a memory disk: a tab or newline in the path, or a name that is not one plain element", s.Src, s.Name)
			}
			if fi, err := os.Stat(s.Src); err == nil && fi.IsDir() {
				dirs = append(dirs, name)
			}
			binds = append(binds, s.Src+"\t"+name)
		}
	} else {
		own = nil
	}
	return append(unshare, "--",
		"/bin/sh", "-c", memoryScript, "sandbox-disk",
		d.Dir, fmt.Sprintf("size=%d,nr_inodes=%d", sp.Bytes, sp.Inodes), sp.Seed, overlayUpper, overlayWork, sp.Layout.Cache,
		strconv.FormatInt(time.Now().Unix(), 10), strings.Join(dirs, "\n"), mode, "--",
		strings.Join(own, "\n"), strings.Join(binds, "\n")), nil
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
// overlay in a temporary directory for a sandbox of identity id (its
// Stage ignored), as MemoryCommand would with PATH path, and runs
// /bin/true on it, to tell whether memory disks can be had here.
func TryMemory(ctx context.Context, path string, bytes, inodes int64, id Identity) error {
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
	id.Stage = nil
	a, err := MemoryCommand(Memory(mnt), sp, id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `exec "$@"`, "sandbox-gate"}, append(a, "/bin/true")...)...)
	cmd.Env = []string{"PATH=" + path}
	if out, err := cmd.CombinedOutput(); err != nil {
		what := "mount a tmpfs and an overlay in a user and mount namespace of our own (unshare --user --map-root-user --mount)"
		if id.own() {
			what = fmt.Sprintf("map uid %d and gid %d into a user namespace of our own (unshare --map-users, newuidmap, newgidmap) and mount a tmpfs and an overlay in it", id.UID, id.GID)
		}
		return fmt.Errorf("%s: %w: %s", what, err, strings.TrimSpace(string(out)))
	}
	return nil
}
