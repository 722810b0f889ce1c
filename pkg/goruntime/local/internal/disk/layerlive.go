package disk

// Layering a running sandbox's disk over a snapshot: a pooled sandbox
// made a fork.
//
// Layer layers a disk before its sandbox starts, and the sandbox's gate
// copies the mounts into the sandbox's mount namespaces. A sandbox
// started ahead of time (the local backend's warm pool) already runs:
// its disk is in its gate's mount namespace (no longer on the host:
// LeaveHost) and, below that, in bubblewrap's, the sandbox's own, where
// /app and HOME are binds of the disk's directories. LayerLive does what
// Layer does in the first, on a thread of its own that joins it, then
// clones the layered directories' mounts and mounts the clones over the
// sandbox's own directories in the second: the same overlays (one
// superblock each), so that this process (through the gate's namespace,
// as it reaches any disk that left the host) and the sandbox see the
// same files. The binds below stay, hidden, and so does the seed's build
// cache overlay mounted in the sandbox's HOME, which is why the cache's
// new overlay has upper and work directories of its own
// (liveCacheUpper): overlayfs refuses, or warns of undefined behaviour,
// when another mounted overlay uses an upper or work directory.
//
// Every mount is made by this process, as root of the host's user
// namespace, and with Layer's options (read-only idmapped tree below
// upper directories on the sandbox's own disk; nosuid, nodev): the
// sandbox's processes, which have no capability in any namespace, can
// neither unmount, move nor mount over them, and what they show is what
// Layer's show.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The upper and work directories of the build cache's overlay of a disk
// layered while its sandbox runs (LayerLive).
const (
	liveCacheUpper = cowDir + "/gocache/upper"
	liveCacheWork  = cowDir + "/gocache/work"
)

// Live names a running sandbox's mount namespaces, as open
// /proc/<pid>/ns/mnt files: Disk, its gate's, which holds the disk at
// its Dir; Sandbox, the sandbox's own. Points maps each directory of
// Layers.Dirs (DirLayer.Disk) to the absolute path the sandbox sees it
// at.
type Live struct {
	Disk, Sandbox *os.File
	Points        map[string]string
}

// LayerLive layers d, the disk of a running sandbox of uid whose mount
// namespaces live names, over ls (with seed, the seed build cache its
// cache overlay shows), as Layer would have before it started. On success
// d.Lower names the tree and d.LayeredLive is set; on failure the
// sandbox may be layered in part and must be closed.
func (d *Disk) LayerLive(lay Layout, ls Layers, seed string, uid int, live Live) error {
	if live.Disk == nil || live.Sandbox == nil {
		return errors.New("layer a running sandbox's disk: its mount namespaces are not named")
	}
	for _, dl := range ls.Dirs {
		if p := live.Points[dl.Disk]; !filepath.IsAbs(p) {
			return fmt.Errorf("layer a running sandbox's disk: no absolute path in the sandbox for %q", dl.Disk)
		}
	}
	l := *d
	if err := onThreadToEnd(func() error { return l.layerLive(lay, ls, seed, uid, live) }); err != nil {
		return err
	}
	d.Lower, d.LayeredLive = l.Lower, true
	return nil
}

// onThreadToEnd runs f on a thread of its own that the runtime ends
// afterwards, never handing it to another goroutine: f may move it into
// other namespaces. The process's main thread is never that thread (the
// runtime never ends it, and /proc/self shows its namespaces): a
// goroutine that finds itself on it keeps it, so that no other goroutine
// runs there meanwhile, and runs f on another.
func onThreadToEnd(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- onThreadToEnd(f)
			runtime.UnlockOSThread()
			return
		}
		errc <- f() // and the goroutine ends locked: the runtime ends the thread
	}()
	return <-errc
}

// layerLive is LayerLive on a thread of its own (onThreadToEnd), which
// joins the sandbox's mount namespaces.
func (d *Disk) layerLive(lay Layout, ls Layers, seed string, uid int, live Live) error {
	// A thread shares its file system context (root, working directory)
	// with the process's others, and setns refuses a mount namespace to
	// one that does.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("layer a running sandbox's disk: unshare the file system context: %w", err)
	}
	if err := unix.Setns(int(live.Disk.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("layer a running sandbox's disk: join its gate's mount namespace: %w", err)
	}
	if err := makeLiveCache(d.Dir, uid); err != nil {
		return err
	}
	if err := d.layer(lay, ls, seed, uid, liveCacheUpper, liveCacheWork); err != nil {
		return err
	}
	clones := make([]int, 0, len(ls.Dirs))
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	for _, dl := range ls.Dirs {
		// Recursive: HOME's overlay holds the build cache's.
		fd, err := unix.OpenTree(unix.AT_FDCWD, filepath.Join(d.Dir, dl.Disk), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("layer a running sandbox's disk: clone the mounts of its %s (open_tree): %w", dl.Disk, err)
		}
		clones = append(clones, fd)
	}
	if err := unix.Setns(int(live.Sandbox.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("layer a running sandbox's disk: join the sandbox's mount namespace: %w", err)
	}
	// setns made the namespace's root this thread's root and working
	// directory: the points are the sandbox's paths.
	for i, dl := range ls.Dirs {
		if err := unix.MoveMount(clones[i], "", unix.AT_FDCWD, live.Points[dl.Disk], unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: mount its layered %s over %s in the sandbox (move_mount): %w", dl.Disk, live.Points[dl.Disk], err)
		}
	}
	return nil
}

// makeLiveCache makes, on the disk at dir, the build cache overlay's
// upper and work directories of a disk layered live, as Make's template
// and Claim leave the first: uid's, with Go's trim stamp, and the cache's
// subdirectories root's and writable by any uid (the disk's .cow is
// root's, mode 0700; inside the sandbox its HOME is its own, mode 0700),
// so that a merged directory takes their owners and modes rather than
// the seed's read-only ones. The subdirectories and the stamp are moved
// from the seed overlay's upper directory, which the sandbox no longer
// reaches (nothing but the pool's warm-up, which builds nothing, ran
// there): the disk then holds what a disk layered from the outset holds,
// not 256 directories more. One missing there is made.
func makeLiveCache(dir string, uid int) error {
	upper, old := filepath.Join(dir, liveCacheUpper), filepath.Join(dir, overlayUpper)
	for _, p := range []string{upper, filepath.Join(dir, liveCacheWork)} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: %w", err)
		}
	}
	for _, sub := range cacheSubdirs() {
		p := filepath.Join(upper, sub)
		if err := os.Rename(filepath.Join(old, sub), p); err == nil {
			continue
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: %w", err)
		}
		if err := os.Chmod(p, 0o777); err != nil { // past the umask
			return fmt.Errorf("layer a running sandbox's disk: %w", err)
		}
	}
	stamp := filepath.Join(upper, "trim.txt")
	if err := os.Rename(filepath.Join(old, "trim.txt"), stamp); err != nil {
		if err := os.WriteFile(stamp, []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), 0o644); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: stamp the build cache: %w", err)
		}
	}
	for _, p := range []string{upper, stamp} {
		if err := os.Lchown(p, uid, uid); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: give the build cache to uid %d: %w", uid, err)
		}
	}
	return nil
}
