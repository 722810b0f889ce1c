package disk

// New disks from a template. mkfs.ext4 and mount(8) cost two process
// starts and ~0.1-0.2 s a disk on an idle 2-CPU host (0.3-0.7 s each
// under load), which capped how many sandboxes a second could be opened
// and closed. A file system made with lazy inode tables is ~170 KB of
// data in a sparse 4 GiB image, and every disk of one size, inode count
// and layout starts out the same: so the first Make of a kind makes,
// lays out and unmounts a template image once (under a lock, in images),
// and every Make copies its data extents into a new sparse image
// (copy_file_range: well under a millisecond), attaches a loop device and
// mounts it from this process (LOOP_CONFIGURE, mount(2)).
//
// Every disk made from one template has the template's file system UUID;
// nothing here or in the kernel tells disks apart by UUID (each is its own
// loop device), and the sandbox cannot read it (no block device, no
// blkid). The file system is mounted with noinit_itable: the inode
// tables past those in use were never written, and in a sparse image read
// back as zeros, so the kernel thread that would zero them on every new
// disk (ext4lazyinit) has nothing to do.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// templateVersion changes when what a template holds changes.
const templateVersion = "t1"

// templatePath is the template image for sp's size, inode count and
// layout.
func templatePath(sp Spec) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%d\n", templateVersion, sp.Bytes, sp.Inodes)
	for _, group := range [][]string{sp.Layout.Dirs, sp.Layout.Public, {sp.Layout.Cache}} {
		fmt.Fprintf(h, "%s\n", strings.Join(group, "\x00"))
	}
	return filepath.Join(sp.Images, "template-"+hex.EncodeToString(h.Sum(nil)[:8])+".img")
}

// ensureTemplate makes sp's template image unless it exists, one maker at
// a time across processes.
func ensureTemplate(ctx context.Context, sp Spec) (string, error) {
	p := templatePath(sp)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(sp.Images, 0o700); err != nil {
		return "", fmt.Errorf("create disk image directory: %w", err)
	}
	lock, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("lock disk template: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock disk template: %w", err)
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil // made meanwhile
	}
	tmp, err := os.MkdirTemp(sp.Images, "template-")
	if err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	defer os.RemoveAll(tmp)
	img, mnt := filepath.Join(tmp, "disk.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	if err := makeFS(ctx, img, mnt, sp.Bytes, sp.Inodes); err != nil {
		return "", err
	}
	err = layOut(mnt, sp.Layout)
	// A plain unmount: it writes the file system back to the image.
	if uerr := unix.Unmount(mnt, 0); uerr != nil {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		if err == nil {
			err = fmt.Errorf("unmount disk template: %w", uerr)
		}
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(img, p); err != nil {
		return "", fmt.Errorf("make disk template: %w", err)
	}
	return p, nil
}

// layOut makes a new file system at root what Make hands out: lay's
// directories, the overlay's own and the cache's 256 subdirectories in
// its upper directory, with their modes.
func layOut(root string, lay Layout) error {
	_ = os.Remove(filepath.Join(root, "lost+found")) // one inode fewer; nothing runs fsck on a sandbox's disk
	dirs := append([]string{}, lay.Dirs...)
	dirs = append(dirs, overlayDir, overlayUpper, overlayWork)
	for _, sub := range cacheSubdirs() {
		// An upper directory of the same name makes a merged directory
		// take the upper one's owner and mode: the seed's own are
		// nobody's and read-only.
		dirs = append(dirs, filepath.Join(overlayUpper, sub))
	}
	for _, dir := range dirs {
		if err := os.Mkdir(filepath.Join(root, dir), 0o700); err != nil {
			return fmt.Errorf("lay out disk: %w", err)
		}
	}
	// The cache's subdirectories are writable by any uid, so that a
	// claim need not chown 256 of them: only the sandbox's uid can reach
	// them (the disk's .gocache is root's, mode 0700; inside the sandbox
	// its HOME is its own, mode 0700).
	for _, sub := range cacheSubdirs() {
		if err := os.Chmod(filepath.Join(root, overlayUpper, sub), 0o777); err != nil {
			return fmt.Errorf("lay out disk: %w", err)
		}
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return fmt.Errorf("lay out disk: %w", err)
	}
	for _, dir := range lay.Public {
		if err := os.Chmod(filepath.Join(root, dir), 0o755); err != nil {
			return fmt.Errorf("lay out disk: %w", err)
		}
	}
	return nil
}

// copySparse copies src's data extents into dst, a new file of src's
// size: the holes stay holes.
func copySparse(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy disk template: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy disk template: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("create disk image: %w", cerr)
		}
	}()
	if err := out.Truncate(fi.Size()); err != nil {
		return fmt.Errorf("size disk image: %w", err)
	}
	inFD, outFD := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < fi.Size(); {
		data, err := unix.Seek(inFD, off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("copy disk template: %w", err)
		}
		hole, err := unix.Seek(inFD, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("copy disk template: %w", err)
		}
		for pos := data; pos < hole; {
			roff, woff := pos, pos
			n, err := unix.CopyFileRange(inFD, &roff, outFD, &woff, int(hole-pos), 0)
			if err != nil {
				return fmt.Errorf("copy disk template: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("copy disk template: %w", io.ErrUnexpectedEOF)
			}
			pos += int64(n)
		}
		off = hole
	}
	return nil
}

// loopAttachWait bounds how long mountImage keeps asking for a free loop
// device while other opens take the ones it was named.
const loopAttachWait = 30 * time.Second

// mountImage attaches image to a free loop device (autoclear: the kernel
// frees it once the last mount of its file system goes) and mounts it at
// dir with nosuid, nodev, discard and noinit_itable.
func mountImage(image, dir string) error {
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open disk image: %w", err)
	}
	defer f.Close() // the loop device holds its own reference
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return noLoopDevice("/dev/loop-control: " + err.Error())
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:], image)
	// LOOP_CTL_GET_FREE names the lowest free device to every caller
	// until one of them configures it: with hundreds of sandboxes opening
	// at once (an MCP server under load), the others find it taken
	// (EBUSY) and ask again, each after a short random wait so that they
	// do not collide again in step; the wait is bounded, not the count.
	giveUp := time.Now().Add(loopAttachWait)
	for attempt := 0; ; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return noLoopDevice("LOOP_CTL_GET_FREE: " + err.Error())
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return noLoopDevice(dev + ": " + err.Error())
		}
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) && time.Now().Before(giveUp) {
			lf.Close() // another open took it first
			time.Sleep(time.Duration(rand.Int64N(int64(min(attempt+1, 20)) * int64(time.Millisecond))))
			continue
		}
		if err != nil {
			lf.Close()
			return fmt.Errorf("attach %s to %s: %w", image, dev, err)
		}
		merr := unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "discard,noinit_itable")
		// Closing our descriptor leaves the device attached while the
		// mount holds it; without a mount, autoclear detaches it now.
		lf.Close()
		if merr != nil {
			return fmt.Errorf("mount disk image %s (%s) at %s: %w", image, dev, dir, merr)
		}
		return nil
	}
}

// PruneTemplateBuilds removes what a template build killed midway left in
// images: its directory (template-*, beside the finished templates'
// images), with the file system it was laying out maybe still mounted
// there. It does so only while no build holds a template's lock, so a
// build under way in another process is left alone.
func PruneTemplateBuilds(images string) {
	dirs, _ := filepath.Glob(filepath.Join(images, "template-*"))
	var builds []string
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			builds = append(builds, d)
		}
	}
	if len(builds) == 0 {
		return
	}
	locks, _ := filepath.Glob(filepath.Join(images, "template-*.img.lock"))
	for _, l := range locks {
		f, err := os.OpenFile(l, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		defer f.Close()
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			return // a build runs: its directory is among them
		}
	}
	for _, d := range builds {
		_ = unix.Unmount(filepath.Join(d, "mnt"), unix.MNT_DETACH)
		_ = os.RemoveAll(d)
	}
}
