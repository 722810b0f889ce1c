package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// runRoot holds what the sandboxes' host uids must reach by path, since
// bubblewrap, started as such a uid, resolves every bind source itself:
// the mount points of sandbox disks (disks/), read-only stagings of paths
// the caller keeps in directories others cannot enter (ro/, e.g. a module
// cache under /root or a server binary under a private temporary
// directory), and the uid leases (uids/, root-only). Each directory on
// the way is mode 0711: enterable, not listable.
const runRoot = "/run/go-runtime-sandbox"

// stageBinds sets where Go, the module cache and the server are bound
// from. As the caller's own uid, that is their own paths. As sandbox host
// uids, a path that some uid cannot reach is bound read-only under
// runRoot/ro/ once and reused by every sandbox (and every backend) after.
func (b *Backend) stageBinds() error {
	b.bindGoroot, b.bindModCache, b.bindServer, b.bindProcessAPI = b.goroot, b.modCache, b.server, b.processAPI
	if !b.hostUID {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(runRoot, "ro"), 0o711); err != nil {
		return fmt.Errorf("create %s: %w", runRoot, err)
	}
	for _, d := range []string{runRoot, filepath.Join(runRoot, "ro")} {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	unstageDeleted()
	var err error
	if b.bindGoroot, err = stage(b.goroot); err != nil {
		return err
	}
	if b.modCache != "" {
		if b.bindModCache, err = stage(b.modCache); err != nil {
			return err
		}
	}
	if b.bindServer, err = stage(b.server); err != nil {
		return err
	}
	if b.processAPI != "" {
		if b.bindProcessAPI, err = stage(b.processAPI); err != nil {
			return err
		}
	}
	return nil
}

// reachable reports whether any uid can enter every directory on the way
// to p and read p (and enter it, for a directory).
func reachable(p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	want := os.FileMode(0o004)
	if fi.IsDir() {
		want = 0o005
	}
	if fi.Mode().Perm()&want != want {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// stage returns p when every uid can reach it, else the path of a
// read-only bind mount of p under runRoot/ro/ (made if missing).
func stage(p string) (string, error) {
	if reachable(p) {
		return p, nil
	}
	sum := sha256.Sum256([]byte(p))
	dst := filepath.Join(runRoot, "ro", hex.EncodeToString(sum[:8])+"-"+filepath.Base(p))
	var src, cur unix.Stat_t
	if err := unix.Stat(p, &src); err != nil {
		return "", fmt.Errorf("stage %s for sandbox uids: %w", p, err)
	}
	if unix.Stat(dst, &cur) == nil && cur.Dev == src.Dev && cur.Ino == src.Ino {
		return dst, nil // staged before
	}
	if src.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", err
		}
	} else if f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o444); err != nil {
		return "", err
	} else {
		f.Close()
	}
	if err := unix.Mount(p, dst, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("stage %s at %s for sandbox uids (bind mount): %w", p, dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		_ = unix.Unmount(dst, unix.MNT_DETACH)
		return "", fmt.Errorf("make staged %s read-only: %w", dst, err)
	}
	return dst, nil
}

// unstageDeleted drops stagings of files that were deleted since (a test
// binary's server, rebuilt at another path each run): their mount keeps
// the deleted file alive until unmounted. Sandboxes that still run keep
// their own view of it.
func unstageDeleted() {
	entries, err := os.ReadDir(filepath.Join(runRoot, "ro"))
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(runRoot, "ro", e.Name())
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Nlink != 0 {
			continue
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err == nil || errors.Is(err, unix.EINVAL) {
			_ = os.Remove(p)
		}
	}
}
