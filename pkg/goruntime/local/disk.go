package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Disk quota. A sandbox's writable storage (/app, HOME with its caches,
// /tmp, /run/sandbox) is one ext4 file system of its own: a sparse image
// file of Options.DiskBytes under StateDir/disks/, made with
// Options.DiskInodes inodes and loop-mounted on the host with
// nosuid,nodev,discard. Why this mechanism:
//
//   - it holds on a stock Debian host: ext4 and loop devices are in every
//     distribution kernel, mkfs.ext4 (e2fsprogs) and mount (util-linux)
//     are always installed; no new file system for the state directory,
//     no quota options on the host's mounts (project quotas would need
//     both), and it caps bytes and inodes separately;
//   - a tmpfs would be charged to the sandbox's memory cgroup, so a disk
//     quota above the memory limit (4 GiB vs 1 GiB) could not be had;
//   - the image is sparse and mounted with discard: the host pays for
//     what the sandbox holds, and deleting files inside gives the space
//     back.
//
// The seed build cache cannot be hard-linked into another file system,
// so GOCACHE is an overlay: the seed, read-only, below an upper directory
// inside the image. What a sandbox builds lands in its image and counts
// against its quota; the seed is shared and never written.
//
// The mounts live in the host's mount namespace, so they persist across
// Disconnect and Attach from any process; Close (or New's prune of a dead
// sandbox) unmounts them and deletes the image. Making a file system
// costs ~0.2 s, so like the spare build caches the backend keeps
// spareDisks ready (made, mounted, overlay in place) and Open claims one.

// spareDisks is how many ready disks the backend keeps.
const spareDisks = 2

// disk is one sandbox's file system: Image mounted at Dir.
type disk struct {
	Image string `json:"image"`
	Dir   string `json:"dir"`
}

// diskByID is the disk named id: its image in images (StateDir/disks),
// its mount point under runRoot, where a sandbox's host uid reaches it.
func diskByID(images, id string) disk {
	return disk{Image: filepath.Join(images, id+".img"), Dir: filepath.Join(runRoot, "disks", id)}
}

func (d disk) upper() string { return filepath.Join(d.Dir, ".gocache", "upper") }

// disksDir holds images, their mount points and the spare pool.
func (b *Backend) disksDir() string { return stateDir(b.opts.StateDir).disks() }

// spareDiskDir holds one marker file per ready disk made for this seed,
// size and inode count; the marker's name is the disk's id.
func (b *Backend) spareDiskDir(seed string) string {
	return filepath.Join(b.disksDir(), "spare", fmt.Sprintf("%s-%d-%d-%s", filepath.Base(seed), b.opts.DiskBytes, b.opts.DiskInodes, diskLayout))
}

// diskLayout names the layout makeDisk gives a disk; spares made with
// another layout (by an older version) are not claimed, and pruned.
const diskLayout = "l2"

// cacheSubdirs are the Go build cache's 256 subdirectories.
func cacheSubdirs() []string {
	out := make([]string, 256)
	for i := range out {
		out[i] = fmt.Sprintf("%02x", i)
	}
	return out
}

// makeDisk makes, mounts and lays out a new disk whose GOCACHE shows the
// seed. Its directories belong to root until claimDisk hands them over.
func (b *Backend) makeDisk(ctx context.Context, seed string) (d disk, err error) {
	if strings.ContainsAny(seed, ",:\\") {
		return d, fmt.Errorf("seed build cache path %s holds a character overlayfs options cannot carry (, : or \\): set Options.StateDir to a plainer path", seed)
	}
	if err := b.checkHostSpace(); err != nil {
		return d, err
	}
	id := newID()
	d = diskByID(b.disksDir(), id)
	if err := os.MkdirAll(filepath.Dir(d.Dir), 0o711); err != nil {
		return d, fmt.Errorf("create disk mount point: %w", err)
	}
	for _, dir := range []string{runRoot, filepath.Dir(d.Dir)} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return d, err
		}
	}
	if err := os.Mkdir(d.Dir, 0o700); err != nil {
		return d, fmt.Errorf("create disk mount point: %w", err)
	}
	defer func() {
		if err != nil {
			d.remove()
		}
	}()
	if err = os.MkdirAll(filepath.Dir(d.Image), 0o700); err != nil {
		return d, fmt.Errorf("create disk image directory: %w", err)
	}
	f, err := os.OpenFile(d.Image, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return d, fmt.Errorf("create disk image: %w", err)
	}
	err = f.Truncate(b.opts.DiskBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d, fmt.Errorf("size disk image: %w", err)
	}
	// No journal (a sandbox's scratch space needs no crash consistency,
	// and the journal would take 64+ MiB of the quota), no reserved
	// blocks (the quota is the sandbox's), lazy inode tables (fast, and
	// the image stays sparse).
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-N", strconv.FormatInt(b.opts.DiskInodes, 10), "-m", "0",
		"-O", "^has_journal,^resize_inode", "-E", "lazy_itable_init=1,nodiscard", "-L", "sandbox", d.Image)
	mkfs.Env = []string{"PATH=/usr/sbin:/sbin:/usr/bin:/bin"}
	if out, err := mkfs.CombinedOutput(); err != nil {
		return d, fmt.Errorf("mkfs.ext4 %s: %w: %s", d.Image, err, strings.TrimSpace(string(out)))
	}
	mount := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,discard,nosuid,nodev", d.Image, d.Dir)
	mount.Env = mkfs.Env
	if out, err := mount.CombinedOutput(); err != nil {
		return d, fmt.Errorf("loop-mount disk image %s: %w: %s", d.Image, err, strings.TrimSpace(string(out)))
	}
	_ = os.Remove(filepath.Join(d.Dir, "lost+found")) // one inode fewer; nothing runs fsck on a sandbox's disk
	l := layout{dir: d.Dir}
	dirs := []string{l.etc(), l.app(), l.home(), filepath.Dir(l.gocache()), l.gocache(), l.tmp(), l.run(), filepath.Dir(d.upper()), d.upper(), filepath.Join(d.Dir, ".gocache", "work")}
	for _, sub := range cacheSubdirs() {
		// An upper directory of the same name makes a merged directory
		// take the upper one's owner and mode: the seed's own are
		// nobody's and read-only.
		dirs = append(dirs, filepath.Join(d.upper(), sub))
	}
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return d, fmt.Errorf("lay out disk: %w", err)
		}
	}
	// The cache's subdirectories are writable by any uid, so that a
	// claim need not chown 256 of them: only the sandbox's uid can reach
	// them (the disk's .gocache is root's, mode 0700; inside the sandbox
	// its HOME is its own, mode 0700).
	for _, sub := range cacheSubdirs() {
		if err := os.Chmod(filepath.Join(d.upper(), sub), 0o777); err != nil {
			return d, err
		}
	}
	if err := os.Chmod(d.Dir, 0o711); err != nil {
		return d, err
	}
	if err := os.Chmod(l.etc(), 0o755); err != nil { // root's; the sandbox's passwd, group, hosts
		return d, err
	}
	opts := "lowerdir=" + seed + ",upperdir=" + d.upper() + ",workdir=" + filepath.Join(d.Dir, ".gocache", "work")
	if err := unix.Mount("overlay", l.gocache(), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return d, fmt.Errorf("mount the build cache overlay (%s): %w", opts, err)
	}
	return d, nil
}

// checkHostSpace refuses a new disk image when the file system that holds
// the images has less than Options.DiskBytes free. The images are sparse:
// a sandbox's disk takes host space only as the sandbox writes, so live
// sandboxes together may be promised more than the host has (docs/
// local-backend.md, "What one sandbox can take from the host"). This
// check keeps a host that is already nearly full from taking sandboxes
// that could not fill even their own quota, and from being filled to
// the last byte by them.
func (b *Backend) checkHostSpace() error {
	dir := b.disksDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create disk image directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space for disk images in %s: %w", dir, err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < b.opts.DiskBytes {
		return fmt.Errorf("the file system of %s has %d MiB free, less than one sandbox's disk quota of %d MiB: "+
			"free space there, move the state directory (Options.StateDir) or lower the quota (Options.DiskBytes)",
			dir, free>>20, b.opts.DiskBytes>>20)
	}
	return nil
}

// claimDisk takes a ready disk from the spare pool, or makes one, and
// gives its directories to uid (0: leave them to root).
func (b *Backend) claimDisk(ctx context.Context, seed string, uid int) (disk, error) {
	d, ok := b.claimSpareDisk(seed)
	if !ok {
		var err error
		if d, err = b.makeDisk(ctx, seed); err != nil {
			return d, err
		}
	}
	l := layout{dir: d.Dir}
	// A fresh mtime on the image: pruneDisks leaves disks whose image is
	// young alone, and this one is not yet named by a sandbox.json (a
	// spare's image may be hours old).
	now := time.Now()
	if err := os.Chtimes(d.Image, now, now); err != nil {
		d.remove()
		return d, fmt.Errorf("claim disk: %w", err)
	}
	stamp := strconv.FormatInt(time.Now().Unix(), 10) + "\n"
	// Through the overlay, not on the upper directory behind its back:
	// overlayfs keeps its own copy of a directory's owner and mode.
	if err := os.WriteFile(filepath.Join(l.gocache(), "trim.txt"), []byte(stamp), 0o644); err != nil {
		d.remove()
		return d, fmt.Errorf("stamp build cache: %w", err)
	}
	if uid > 0 {
		paths := []string{l.app(), l.home(), filepath.Dir(l.gocache()), l.tmp(), l.run(), l.gocache(), filepath.Join(l.gocache(), "trim.txt")}
		for _, p := range paths {
			if err := os.Lchown(p, uid, uid); err != nil {
				d.remove()
				return d, fmt.Errorf("give disk to uid %d: %w", uid, err)
			}
		}
	}
	return d, nil
}

// claimSpareDisk takes a ready disk: removing its marker is the claim
// (only one remover succeeds), then the disk must still be mounted (a
// reboot unmounts spares but leaves their markers).
func (b *Backend) claimSpareDisk(seed string) (disk, bool) {
	dir := b.spareDiskDir(seed)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return disk{}, false
	}
	for _, e := range entries {
		if !validID(e.Name()) || os.Remove(filepath.Join(dir, e.Name())) != nil {
			continue
		}
		d := diskByID(b.disksDir(), e.Name())
		if d.complete() {
			return d, true
		}
		b.opts.Logger.Warn("local backend: a spare disk is not mounted or not laid out; removing it", "disk", d.Dir)
		d.remove()
	}
	return disk{}, false
}

// complete reports whether the disk is mounted, with the overlay on its
// GOCACHE, and holds every directory makeDisk lays out.
func (d disk) complete() bool {
	l := layout{dir: d.Dir}
	if !isMountPoint(d.Dir) || !isMountPoint(l.gocache()) {
		return false
	}
	for _, p := range []string{l.etc(), l.app(), l.home(), l.tmp(), l.run(), d.upper()} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// refillSpareDisks tops the pool of ready disks up to spareDisks, one
// filler at a time per backend.
func (b *Backend) refillSpareDisks(seed string) {
	if !b.refillingDisks.CompareAndSwap(false, true) {
		return
	}
	started := b.bg.start(func(bgCtx context.Context) {
		defer b.refillingDisks.Store(false)
		dir := b.spareDiskDir(seed)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return
		}
		for {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) >= spareDisks || bgCtx.Err() != nil {
				return
			}
			ctx, cancel := context.WithTimeout(bgCtx, time.Minute)
			d, err := b.makeDisk(ctx, seed)
			cancel()
			if err != nil {
				b.opts.Logger.Debug("local backend: make spare disk", "err", err)
				return
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(d.Dir)), nil, 0o600); err != nil {
				d.remove()
				return
			}
		}
	})
	if !started {
		b.refillingDisks.Store(false)
	}
}

// remove unmounts the disk (and the overlay on it), deletes its image
// and its mount point. The kernel frees the loop device (autoclear) once
// no mount namespace holds the file system any more.
func (d disk) remove() error {
	if d.Dir == "" {
		return nil
	}
	var errs []error
	if isMountPoint(d.Dir) {
		if err := unix.Unmount(d.Dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", d.Dir, err))
		}
	}
	if err := os.Remove(d.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.Remove(d.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isMountPoint reports whether p is the root of a mount: its device
// differs from its parent's. (A bind of a directory onto itself would
// fool it; nothing here makes one.)
func isMountPoint(p string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(p, &st) != nil || unix.Lstat(filepath.Dir(p), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}
