// Package disk makes, claims, watches and removes the local backend's
// per-sandbox disks: a sandbox's writable storage (/app, HOME with its
// caches, /tmp, /run/sandbox) is one ext4 file system of its own, a sparse
// image file of a given size under the state directory's disks/, made
// with a given number of inodes and loop-mounted on the host with
// nosuid,nodev,discard,noinit_itable. Why this mechanism:
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
// Make mounts a disk in the host's mount namespace, where the backend
// lays it out and hands it over (Claim). Once its sandbox runs, the disk
// leaves the host (LeaveHost): its mounts are then only in the sandbox's
// own mount namespace, which its gate copied from the host's (package
// gate, mounts.go), and they go with the sandbox's last process, when
// the kernel frees the loop device too (autoclear). So the host's
// namespace holds the spare disks and the ones being started, not two
// mounts per live sandbox, which every new mount namespace would copy.
// The disk persists across Disconnect and Attach from any process, which
// reach it through /proc/<pid>/root (Through); the sandbox's Close (or
// New's prune of a dead sandbox) deletes the image and the mount point
// (Remove).
// A new disk is a copy of a template image made once per kind
// (template.go): a few milliseconds, where mkfs.ext4 and mount(8) cost
// 0.1-0.7 s; the backend still keeps spare disks ready (its spare pool,
// local's sparedisk.go) and Open claims one.
//
// Every function takes the directories it works in (the images, the mount
// points) and the disk's ID as parameters; nothing here is global.
package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Disk is one sandbox's file system: Image mounted at Dir. It is part of
// the sandbox's sandbox.json.
type Disk struct {
	Image string `json:"image"`
	Dir   string `json:"dir"`
	// Memory: a memory disk (memory.go), mounted in the sandbox's own
	// mount namespace; no image.
	Memory bool `json:"memory,omitempty"`
	// OwnIDs: a memory disk whose sandbox runs as host ids of its own
	// (Identity): its HostDir holds the host's sockets for it.
	OwnIDs bool `json:"own_ids,omitempty"`
	// LeftHost: the disk was unmounted from the host's mount namespace
	// once its sandbox's held it (LeaveHost).
	LeftHost bool `json:"left_host,omitempty"`
	// Lower: the snapshot's tree the disk is layered over (Layer); "":
	// none.
	Lower string `json:"lower,omitempty"`
	// LayeredLive: layered while its sandbox ran (LayerLive), its build
	// cache's overlay on upper and work directories of its own
	// (liveCacheUpper).
	LayeredLive bool `json:"layered_live,omitempty"`
}

// cacheUpper is the upper directory of d's build cache overlay, relative
// to d.
func (d Disk) cacheUpper() string {
	if d.LayeredLive {
		return liveCacheUpper
	}
	return overlayUpper
}

// InSandboxNS reports whether d is mounted only in its sandbox's mount
// namespace: a memory disk always, another once it left the host.
func (d Disk) InSandboxNS() bool { return d.Memory || d.LeftHost }

// LeaveHost unmounts d, with the overlay on it, from the host's mount
// namespace, and marks it LeftHost. Its sandbox must run in a mount
// namespace of its own that holds the disk, with private mounts (package
// gate's Mounts), or the sandbox loses its disk too.
func (d *Disk) LeaveHost() error {
	if err := unix.Unmount(d.Dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the sandbox's disk %s from the host: %w", d.Dir, err)
	}
	d.LeftHost = true
	return nil
}

// ByID is the disk named id: its image in images (a state directory's
// disks/), its mount point in mounts, where a sandbox's host uid reaches
// it.
func ByID(images, mounts, id string) Disk {
	return Disk{Image: filepath.Join(images, id+".img"), Dir: filepath.Join(mounts, id)}
}

// ID is the disk's ID: the name of its mount point.
func (d Disk) ID() string { return filepath.Base(d.Dir) }

// The overlay's own directories on a disk, root's, beside the Layout:
// the upper directory (what the sandbox adds to the seed) and the work
// directory overlayfs needs on the same file system.
const (
	overlayDir   = ".gocache"
	overlayUpper = ".gocache/upper"
	overlayWork  = ".gocache/work"
)

// Layout is what Make lays out on a new disk and Claim hands over, as
// paths relative to the disk's root.
type Layout struct {
	// Dirs are made mode 0700, root's, in order (parents first).
	Dirs []string
	// Public are those of Dirs made mode 0755 (root's, readable by the
	// sandbox: its /etc files).
	Public []string
	// Cache is the one of Dirs the seed's overlay is mounted on (GOCACHE).
	Cache string
	// Owned are the Dirs Claim gives to the sandbox's uid (with Cache and
	// its trim.txt).
	Owned []string
}

// Spec is how Make makes a disk.
type Spec struct {
	Images string // the directory of disk images
	Mounts string // the directory of mount points
	Bytes  int64  // the file system's size
	Inodes int64  // its inode count
	Seed   string // the seed build cache the overlay on Layout.Cache shows
	Layout Layout
	// MaxLoops, when positive, is how many loop devices may be attached
	// on the host (by anyone) before Make refuses a new disk, as the
	// kernel would past its own limit: tests use a small one. 0: only
	// the kernel's limit.
	MaxLoops int
}

// cacheSubdirs are the Go build cache's 256 subdirectories.
func cacheSubdirs() []string {
	out := make([]string, 256)
	for i := range out {
		out[i] = fmt.Sprintf("%02x", i)
	}
	return out
}

// Make makes, mounts and lays out the new disk id, whose Layout.Cache
// shows the seed: a copy of the template of sp's kind (template.go). Its directories belong to root until Claim hands them
// over. It refuses when the images' file system has less than sp.Bytes
// free (checkHostSpace).
func Make(ctx context.Context, id string, sp Spec) (d Disk, err error) {
	if err := overlayPath(sp.Seed); err != nil {
		return d, err
	}
	if err := checkHostSpace(sp.Images, sp.Bytes); err != nil {
		return d, err
	}
	if sp.MaxLoops > 0 {
		if n := attachedLoops("/sys/block"); n >= sp.MaxLoops {
			return d, noLoopDevice(fmt.Sprintf("the limit set is %d", sp.MaxLoops))
		}
	}
	d = ByID(sp.Images, sp.Mounts, id)
	if err := os.MkdirAll(sp.Mounts, 0o711); err != nil {
		return d, fmt.Errorf("create disk mount point: %w", err)
	}
	for _, dir := range []string{filepath.Dir(sp.Mounts), sp.Mounts} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return d, fmt.Errorf("open %s to sandbox uids: %w", dir, err)
		}
	}
	if err := os.Mkdir(d.Dir, 0o700); err != nil {
		return d, fmt.Errorf("create disk mount point: %w", err)
	}
	defer func() {
		if err != nil {
			d.Remove()
		}
	}()
	tmpl, err := ensureTemplate(ctx, sp)
	if err != nil {
		return d, err
	}
	if err := copySparse(tmpl, d.Image); err != nil {
		return d, err
	}
	if err := mountImage(d.Image, d.Dir); err != nil {
		return d, err
	}
	opts := "lowerdir=" + sp.Seed + ",upperdir=" + filepath.Join(d.Dir, overlayUpper) + ",workdir=" + filepath.Join(d.Dir, overlayWork)
	if err := unix.Mount("overlay", filepath.Join(d.Dir, sp.Layout.Cache), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return d, fmt.Errorf("mount the build cache overlay (%s): %w", opts, err)
	}
	warmLookups(filepath.Join(d.Dir, sp.Layout.Cache))
	return d, nil
}

// warmLookups looks a name no cache entry has up in each of the cache's
// 256 subdirectories, through the overlay just mounted. Each is a merged
// directory (its upper half on the new disk: layOut), and the first
// lookup in one reads its block and inode from the disk's loop device,
// whose cache starts empty, and sets overlayfs' origin on it: a
// sandbox's first go command made those lookups itself (cache.Open, then
// each entry it reads) and its first `go run` of new code took 18-32 ms
// more than its second (perf: ovl_lookup, ext4_lookup, loop reads; 0-12
// ms more once looked up here). The lookups cost 11 ms a disk, made
// before any Open needs it but when none is spare. They create nothing:
// the origin is what the sandbox's first lookup would have written.
func warmLookups(cache string) {
	subs := cacheSubdirs()
	const workers = 8 // the lookups wait on the loop device, not the CPU
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(subs); i += workers {
				_, _ = os.Lstat(filepath.Join(cache, subs[i], "-"))
			}
		})
	}
	wg.Wait()
}

// Claim readies a disk Make made for the sandbox that takes it: a fresh
// mtime on its image (Prune leaves disks whose image is young alone, and
// this one is not yet named by a sandbox.json; a spare's image may be
// hours old), a fresh trim stamp in its build cache, and lay.Owned, the
// cache and the stamp given to uid (0: left to root).
func (d Disk) Claim(lay Layout, uid int) error {
	now := time.Now()
	if err := os.Chtimes(d.Image, now, now); err != nil {
		return fmt.Errorf("claim disk: %w", err)
	}
	cache := filepath.Join(d.Dir, lay.Cache)
	stamp := strconv.FormatInt(now.Unix(), 10) + "\n"
	// Through the overlay, not on the upper directory behind its back:
	// overlayfs keeps its own copy of a directory's owner and mode.
	if err := os.WriteFile(filepath.Join(cache, "trim.txt"), []byte(stamp), 0o644); err != nil {
		return fmt.Errorf("stamp build cache: %w", err)
	}
	if uid <= 0 {
		return nil
	}
	var paths []string
	for _, p := range lay.Owned {
		paths = append(paths, filepath.Join(d.Dir, p))
	}
	for _, p := range append(paths, cache, filepath.Join(cache, "trim.txt")) {
		if err := os.Lchown(p, uid, uid); err != nil {
			return fmt.Errorf("give disk to uid %d: %w", uid, err)
		}
	}
	return nil
}

// Complete reports whether the disk is mounted, with the overlay on its
// lay.Cache, and holds every directory Make lays out.
func (d Disk) Complete(lay Layout) bool {
	if !isMountPoint(d.Dir) || !isMountPoint(filepath.Join(d.Dir, lay.Cache)) {
		return false
	}
	for _, p := range append(append([]string{}, lay.Dirs...), overlayUpper) {
		if fi, err := os.Lstat(filepath.Join(d.Dir, p)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// Remove unmounts the disk (and the overlay on it) if the host still has
// it, deletes its image and its mount point. The kernel frees the loop
// device (autoclear) once no mount namespace holds the file system any
// more: removing the mount point detaches any copy another namespace
// still has of it. A memory disk goes with its sandbox's mount
// namespace: nothing to do.
func (d Disk) Remove() error {
	if d.Dir == "" || d.Memory {
		return nil
	}
	var errs []error
	if isMountPoint(d.Dir) {
		if err := unix.Unmount(d.Dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", d.Dir, err))
		}
	}
	if err := os.Remove(d.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove disk image: %w", err))
	}
	if len(errs) == 0 {
		if err := os.Remove(d.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove disk mount point: %w", err))
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
