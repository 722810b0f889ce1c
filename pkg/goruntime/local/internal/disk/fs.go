package disk

// The file system itself: making and mounting an image, whether this host
// can, and whether it has room for one more.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// toolPath is the PATH mkfs.ext4 and mount run with.
const toolPath = "/usr/sbin:/sbin:/usr/bin:/bin"

// makeFS makes image, a new sparse file of size bytes, into an ext4 file
// system of inodes inodes and loop-mounts it at dir (which must exist).
func makeFS(ctx context.Context, image, dir string, bytes, inodes int64) error {
	if err := os.MkdirAll(filepath.Dir(image), 0o700); err != nil {
		return fmt.Errorf("create disk image directory: %w", err)
	}
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	err = f.Truncate(bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("size disk image: %w", err)
	}
	// No journal (a sandbox's scratch space needs no crash consistency,
	// and the journal would take 64+ MiB of the quota), no reserved
	// blocks (the quota is the sandbox's), lazy inode tables (fast, and
	// the image stays sparse).
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-N", strconv.FormatInt(inodes, 10), "-m", "0",
		"-O", "^has_journal,^resize_inode", "-E", "lazy_itable_init=1,nodiscard", "-L", "sandbox", image)
	mkfs.Env = []string{"PATH=" + toolPath}
	if out, err := mkfs.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w: %s", image, err, strings.TrimSpace(string(out)))
	}
	mount := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,discard,nosuid,nodev", image, dir)
	mount.Env = mkfs.Env
	if out, err := mount.CombinedOutput(); err != nil {
		if loopFailure(string(out)) {
			return fmt.Errorf("loop-mount disk image %s: %w", image, noLoopDevice(strings.TrimSpace(string(out))))
		}
		return fmt.Errorf("loop-mount disk image %s: %w: %s", image, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// HostProblem says why this host cannot make disks (detail) and what
// would let it (fix), or returns two empty strings when nothing is
// missing. It checks without trying; Try tries.
func HostProblem() (detail, fix string) {
	switch {
	case os.Geteuid() != 0:
		return "making and mounting a file system per sandbox needs root",
			"run as root, or relax it (Options.Relax.DiskQuota): sandboxes then share the state directory's file system, capped only per file"
	case !found("mkfs.ext4"):
		return "mkfs.ext4 not found", "apt-get install e2fsprogs (scripts/install-deps.sh)"
	case !found("mount"):
		return "mount not found", "apt-get install mount (scripts/install-deps.sh)"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop devices (/dev/loop-control: " + err.Error() + ")",
			"modprobe loop, or give the container loop devices (docker run --device /dev/loop-control ...)"
	}
	return "", ""
}

// found reports whether the command name is installed, in toolPath or on
// PATH.
func found(name string) bool {
	for _, dir := range filepath.SplitList(toolPath) {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	_, err := exec.LookPath(name)
	return err == nil
}

// Try makes, mounts and removes a disk of bytes and inodes in a temporary
// directory, to tell whether disks can be had here.
func Try(ctx context.Context, bytes, inodes int64) error {
	dir, err := os.MkdirTemp("", "sandbox-check-")
	if err != nil {
		return fmt.Errorf("try a disk: %w", err)
	}
	defer os.RemoveAll(dir)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return fmt.Errorf("try a disk: %w", err)
	}
	if err := makeFS(ctx, filepath.Join(dir, "disk.img"), mnt, bytes, inodes); err != nil {
		return err
	}
	_ = unix.Unmount(mnt, unix.MNT_DETACH)
	return nil
}

// checkHostSpace refuses a new disk image when the file system that holds
// images has less than bytes (a sandbox's disk quota) free. The images are
// sparse: a sandbox's disk takes host space only as the sandbox writes, so
// live sandboxes together may be promised more than the host has (docs/
// local-backend.md, "What one sandbox can take from the host"). This
// check keeps a host that is already nearly full from taking sandboxes
// that could not fill even their own quota, and from being filled to
// the last byte by them.
func checkHostSpace(images string, bytes int64) error {
	if err := os.MkdirAll(images, 0o700); err != nil {
		return fmt.Errorf("create disk image directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(images, &st); err != nil {
		return fmt.Errorf("free space for disk images in %s: %w", images, err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < bytes {
		return fmt.Errorf("the file system of %s has %d MiB free, less than one sandbox's disk quota of %d MiB: "+
			"free space there, move the state directory (Options.StateDir) or lower the quota (Options.DiskBytes)",
			images, free>>20, bytes>>20)
	}
	return nil
}
