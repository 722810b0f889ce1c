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
// when another mounted overlay uses an upper or work directory. That
// upper directory holds only Go's trim stamp: the cache's 256
// subdirectories, writable by
// the sandbox (the seed's are read-only), come from a lower layer the
// host makes once and every such disk shares (Live.CacheDirs), between
// the tree's entries and the seed, rather than 256 directories made (a
// tenth of a second on a busy host's loop device) on each disk.
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
	"syscall"
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
	// CacheDirs is a directory, root's and reached by root only, that
	// holds the build cache's subdirectories (made if missing:
	// cacheDirs), shown below the tree's entries.
	CacheDirs string
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
	if err := cacheDirs(live.CacheDirs); err != nil {
		return err
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
	if err := d.layer(lay, ls, seed, uid, cacheLayer{upper: liveCacheUpper, work: liveCacheWork, between: live.CacheDirs}); err != nil {
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
// upper and work directories of a disk layered live, the upper one as
// Claim leaves a disk's: uid's, with Go's trim stamp (now). Its
// subdirectories come from Live.CacheDirs.
func makeLiveCache(dir string, uid int) error {
	upper := filepath.Join(dir, liveCacheUpper)
	for _, p := range []string{upper, filepath.Join(dir, liveCacheWork)} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: %w", err)
		}
	}
	stamp := filepath.Join(upper, "trim.txt")
	if err := os.WriteFile(stamp, []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("layer a running sandbox's disk: stamp the build cache: %w", err)
	}
	for _, p := range []string{upper, stamp} {
		if err := os.Lchown(p, uid, uid); err != nil {
			return fmt.Errorf("layer a running sandbox's disk: give the build cache to uid %d: %w", uid, err)
		}
	}
	return nil
}

// cacheDirs makes dir, if missing, a read-only layer of the build
// cache's 256 subdirectories, root's and writable by any uid, as Make's
// template has them in a disk's upper directory: a merged subdirectory
// takes their owner and mode, not the seed's (nobody's, read-only), and
// the sandbox's first write into one copies it up into its own upper
// directory. dir itself is root's, mode 0700, so that no other uid of
// the host reaches the subdirectories (overlayfs reads its layers as
// root); it is made whole under another name and renamed.
func cacheDirs(dir string) error {
	if dir == "" {
		return errors.New("layer a running sandbox's disk: no directory for the build cache's subdirectories")
	}
	if fi, err := os.Lstat(dir); err == nil {
		return checkCacheDirs(dir, fi)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("make the build cache's subdirectories: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, sub := range cacheSubdirs() {
		p := filepath.Join(tmp, sub)
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("make the build cache's subdirectories: %w", err)
		}
		if err := os.Chmod(p, 0o777); err != nil { // past the umask
			return fmt.Errorf("make the build cache's subdirectories: %w", err)
		}
	}
	// Another process may have made it meanwhile: theirs stays.
	if err := os.Rename(tmp, dir); err != nil {
		if fi, serr := os.Lstat(dir); serr == nil {
			return checkCacheDirs(dir, fi)
		}
		return fmt.Errorf("make the build cache's subdirectories: %w", err)
	}
	return nil
}

// checkCacheDirs refuses a cacheDirs layer that is not a directory
// root's and closed to others (MkdirTemp's 0700): its subdirectories are
// writable by any uid that reaches them, and what it holds shows in
// every sandbox's build cache.
func checkCacheDirs(dir string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("layer a running sandbox's disk: %s is not a directory root's and closed to others (mode %v): remove it", dir, fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(dir, "ff")); err != nil {
		return fmt.Errorf("layer a running sandbox's disk: %s lacks the build cache's subdirectories: remove it: %w", dir, err)
	}
	return nil
}
