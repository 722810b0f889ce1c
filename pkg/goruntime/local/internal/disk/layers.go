package disk

// Layering a root sandbox's disk over a snapshot: copy-on-write forks.
//
// A snapshot the local backend can layer is a sealed directory tree on
// the host (pkg/goruntime/internal/snapshotstore), every file root's (uid 0, gid 0) and
// reachable by root only. A disk layered over it shows the tree, read
// only, below an empty upper directory of its own, for each of its
// directories the tree holds (/app, HOME) and for GOCACHE (the tree's
// build cache entries between the upper directory and the seed): the
// sandbox reads the snapshot's files in place and what it writes,
// deletes, renames or chmods lands in its own upper directory, on its
// own disk and quota; the tree and every other disk layered on it stay
// as they were.
//
// The tree's files are root's; the sandbox runs as a host uid of its
// own. So the tree is first bound where the overlays can take it as an
// idmapped mount (mount_setattr MOUNT_ATTR_IDMAP, read-only): uid and
// gid 0 show as the sandbox's uid there, and as the sandbox's own files
// inside it, which it may write (copied up into its upper directory,
// with its own uid). Every disk gets its own idmapped view; the tree is
// never written through any of them.
//
// Go's build cache sets a cache file's mtime to now when it uses a file
// whose mtime is over an hour old; on an overlay that would copy the
// whole file up (the snapshot's entries, and the seed's). The cache's
// overlay is mounted with metacopy=on where the kernel allows it: a
// change of metadata copies the metadata up, not the data. Root only:
// overlayfs refuses metacopy in a user namespace, and trusts it because
// nothing in a sandbox can set the trusted.overlay.* attributes it
// reads (the upper directory is on the sandbox's disk, written by the
// kernel on its behalf; the tree is extracted without extended
// attributes).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// cowDir holds, on a layered disk, the upper and work directories of its
// overlays (cowDir/<name>/upper, cowDir/<name>/work) and, while they are
// mounted, the idmapped view of the tree (cowDir/lower).
const cowDir = ".cow"

// Layers is how a disk is layered over a snapshot's tree: Tree, an
// absolute path, holds the snapshot; Dirs maps directories of the disk's
// Layout (relative to the disk) to the directories of the tree shown
// below them; Cache is the tree's directory of build cache entries, shown
// between the disk's own cache and the seed.
type Layers struct {
	Tree  string
	Dirs  []DirLayer
	Cache string
}

// DirLayer is one directory of a disk (Disk) shown over one of a tree's
// (Tree).
type DirLayer struct{ Disk, Tree string }

// Layer layers d, which Make made and Claim gave to uid (above 0: the
// sandbox's host uid), over ls, with seed the seed build cache Make
// mounted d's cache over. d must still be mounted on the host (not
// LeftHost): the sandbox's mount namespace copies the mounts from there.
// On success d.Lower names the tree.
func (d *Disk) Layer(lay Layout, ls Layers, seed string, uid int) error {
	return d.layer(lay, ls, seed, uid, cacheLayer{upper: overlayUpper, work: overlayWork})
}

// cacheLayer is where a layered disk's build cache overlay keeps what the
// sandbox writes: its upper and work directories, relative to the disk,
// and, when not "", a directory shown between the tree's entries and
// the seed (LayerLive's cacheDirs).
type cacheLayer struct{ upper, work, between string }

// layer is Layer with the build cache's overlay's own directories c.
func (d *Disk) layer(lay Layout, ls Layers, seed string, uid int, c cacheLayer) error {
	if uid <= 0 {
		return errors.New("layer a disk over a snapshot: the sandbox must run as a host uid of its own")
	}
	for _, p := range []string{ls.Tree, seed, c.between} {
		if err := overlayPath(p); err != nil {
			return err
		}
	}
	on := func(name string) string { return filepath.Join(d.Dir, name) }
	lower := on(filepath.Join(cowDir, "lower"))
	if err := os.MkdirAll(lower, 0o700); err != nil {
		return fmt.Errorf("layer the sandbox's disk: %w", err)
	}
	if err := bindIDMapped(ls.Tree, lower, uid); err != nil {
		return err
	}
	// The overlays keep private clones of their layers: the view itself
	// leaves once they are mounted.
	defer unix.Unmount(lower, unix.MNT_DETACH)
	// The cache's overlay over the seed alone goes; it comes back below
	// with the tree's entries in the middle, once HOME, where it is
	// mounted, is layered too.
	if err := unix.Unmount(on(lay.Cache), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("layer the sandbox's disk: unmount the build cache's overlay: %w", err)
	}
	for _, dl := range ls.Dirs {
		if !filepath.IsLocal(dl.Disk) || !filepath.IsLocal(dl.Tree) {
			return fmt.Errorf("layer the sandbox's disk: %q over %q: not names on the disk and in the tree", dl.Disk, dl.Tree)
		}
		upper, work := on(filepath.Join(cowDir, dl.Disk, "upper")), on(filepath.Join(cowDir, dl.Disk, "work"))
		for _, p := range []string{upper, work} {
			if err := os.MkdirAll(p, 0o700); err != nil {
				return fmt.Errorf("layer the sandbox's disk: %w", err)
			}
		}
		// The merged directory's owner and mode are its upper
		// directory's: the sandbox's, 0700, as the disk's own.
		if err := os.Lchown(upper, uid, uid); err != nil {
			return fmt.Errorf("layer the sandbox's disk: %w", err)
		}
		opts := "lowerdir=" + filepath.Join(lower, dl.Tree) + ",upperdir=" + upper + ",workdir=" + work
		if err := unix.Mount("sandbox-layer", on(dl.Disk), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("layer the sandbox's %s over the snapshot (%s): %w", dl.Disk, opts, err)
		}
	}
	if !filepath.IsLocal(ls.Cache) {
		return fmt.Errorf("layer the sandbox's disk: %q is not a name in the tree", ls.Cache)
	}
	// The mount point, in the layered HOME: the tree has it (a snapshot
	// holds the cache's directory), else it is made, as the sandbox's.
	if err := mkdirOwned(d.Dir, lay.Cache, uid); err != nil {
		return err
	}
	lowers := filepath.Join(lower, ls.Cache) + ":" + seed
	if c.between != "" {
		lowers = filepath.Join(lower, ls.Cache) + ":" + c.between + ":" + seed
	}
	opts := "lowerdir=" + lowers + ",upperdir=" + on(c.upper) + ",workdir=" + on(c.work)
	err := unix.Mount("sandbox-cache", on(lay.Cache), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts+",metacopy=on")
	if errors.Is(err, unix.EINVAL) { // a kernel without metacopy
		err = unix.Mount("sandbox-cache", on(lay.Cache), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
	}
	if err != nil {
		return fmt.Errorf("mount the build cache's overlay over the snapshot's (%s): %w", opts, err)
	}
	d.Lower = ls.Tree
	return nil
}

// mkdirOwned makes the directories of rel under root that are missing,
// each mode 0700 and uid's.
func mkdirOwned(root, rel string, uid int) error {
	p := root
	for _, part := range splitPath(rel) {
		p = filepath.Join(p, part)
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("layer the sandbox's disk: %w", err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			return fmt.Errorf("layer the sandbox's disk: %w", err)
		}
	}
	return nil
}

// splitPath splits a relative path into its elements.
func splitPath(rel string) []string {
	var out []string
	for rel != "" && rel != "." {
		dir, file := filepath.Split(rel)
		out = append([]string{file}, out...)
		rel = filepath.Clean(dir)
		if rel == "/" || dir == "" {
			break
		}
	}
	return out
}

// bindIDMapped binds the directory src at dst, read-only, nosuid and
// nodev, with ids 0 shown as uid (and gid uid): an idmapped mount whose
// mapping comes from a user namespace made for it.
func bindIDMapped(src, dst string, uid int) error {
	ns, err := mappingNS(uid)
	if err != nil {
		return err
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("layer the sandbox's disk: clone the snapshot's mount (open_tree %s): %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("layer the sandbox's disk: map the snapshot's ids to uid %d (an idmapped mount, Linux 5.12 or later on a file system that allows it): %w", uid, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("layer the sandbox's disk: mount the snapshot's view at %s: %w", dst, err)
	}
	return nil
}

// mappingNS returns a user namespace that maps uid and gid 0 to uid (an
// open /proc/<pid>/ns/user): that of a short-lived child made in it, as
// the kernel takes an idmapped mount's mapping from a namespace.
func mappingNS(uid int) (*os.File, error) {
	cmd := exec.Command("/bin/sleep", "60")
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("layer the sandbox's disk: make the user namespace of uid %d's mapping: %w", uid, err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("layer the sandbox's disk: %w", err)
	}
	return ns, nil
}

// CacheAddedOver is CacheAdded for a disk layered over a tree (Layer),
// whose build cache entries are in lowerCache, a directory of the tree:
// the sandbox's own additions and the tree's entries it did not delete
// (no whiteout of the same name in the upper directory).
func (d Disk) CacheAddedOver(lowerCache string) (files []string, ok bool, err error) {
	added, ok, err := d.CacheAdded()
	if err != nil || !ok {
		return nil, ok, err
	}
	seen := make(map[string]bool, len(added))
	for _, f := range added {
		seen[f] = true
	}
	upperDir, err := openDir(unix.AT_FDCWD, filepath.Join(d.Dir, d.cacheUpper()))
	if err != nil {
		return nil, false, fmt.Errorf("list the build cache's additions: %w", err)
	}
	defer upperDir.Close()
	subs := map[string]int{} // the upper directory's subdirectories, opened (-1: none)
	defer func() {
		for _, fd := range subs {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	err = filepath.WalkDir(lowerCache, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(lowerCache, p)
		if err != nil || seen[rel] {
			return err
		}
		// Deleted in the sandbox: a whiteout (a character device) or
		// something else of that name in the upper directory, or its
		// directory replaced. Read as root, so each directory is opened
		// relative to the upper one and never through a link (as
		// CacheAdded does).
		dir, name := filepath.Split(rel)
		at := int(upperDir.Fd())
		if dir = filepath.Clean(dir); dir != "." {
			fd, ok := subs[dir]
			if !ok {
				fd, err = unix.Openat(at, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					fd = -1
					if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
						fd = -2 // replaced by something that is not a directory: deleted
					}
				}
				subs[dir] = fd
			}
			if fd == -2 {
				return nil
			}
			if fd == -1 {
				files = append(files, rel)
				return nil
			}
			at = fd
		}
		var st unix.Stat_t
		if unix.Fstatat(at, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list the snapshot's build cache entries: %w", err)
	}
	return append(added, files...), true, nil
}
