package hostuid

// Stagings: bubblewrap, started as a sandbox's host uid, resolves every
// bind source itself, so a path the caller keeps in directories others
// cannot enter (a module cache under /root, a server binary under a
// private temporary directory) is bound read-only somewhere every uid
// can reach first.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Reachable reports whether any uid can enter every directory on the way
// to p and read p (and enter it, for a directory).
func Reachable(p string) bool {
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

// Stage returns p when every uid can reach it, else the path of a
// read-only bind mount of p in stagings (made if missing), a directory
// every uid can enter. Stagings are shared: by every sandbox, and by
// every backend after.
func Stage(stagings, p string) (string, error) {
	if Reachable(p) {
		return p, nil
	}
	sum := sha256.Sum256([]byte(p))
	dst := filepath.Join(stagings, hex.EncodeToString(sum[:8])+"-"+filepath.Base(p))
	var src, cur unix.Stat_t
	if err := unix.Stat(p, &src); err != nil {
		return "", fmt.Errorf("stage %s for sandbox uids: %w", p, err)
	}
	if unix.Stat(dst, &cur) == nil && cur.Dev == src.Dev && cur.Ino == src.Ino {
		return dst, nil // staged before
	}
	if src.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", fmt.Errorf("stage %s for sandbox uids: %w", p, err)
		}
	} else if f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o444); err != nil {
		return "", fmt.Errorf("stage %s for sandbox uids: %w", p, err)
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

// UnstageDeleted drops the stagings in stagings of files that were
// deleted since (a test binary's server, rebuilt at another path each
// run): their mount keeps the deleted file alive until unmounted.
// Sandboxes that still run keep their own view of it.
func UnstageDeleted(stagings string) {
	entries, err := os.ReadDir(stagings)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(stagings, e.Name())
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Nlink != 0 {
			continue
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err == nil || errors.Is(err, unix.EINVAL) {
			_ = os.Remove(p)
		}
	}
}
