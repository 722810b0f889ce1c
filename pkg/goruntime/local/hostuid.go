package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// Host identities: when the backend runs as root, each live sandbox runs
// as a host uid (and gid, the same number) of its own from
// Options.HostUIDBase..+HostUIDCount, like isolate's box ids. Bubblewrap is
// started as that uid, so the sandbox's uid 1000 maps to it: files the
// sandbox writes belong to it on the host, and a process that left the
// sandbox's mount namespace would still be an unprivileged stranger to
// every other sandbox's files (each sandbox's directories are mode 0700,
// owned by its own uid, below the root-only state directory).
//
// Leases live in hostUIDDir, one file per uid in use, machine-wide (two
// backends with different state directories must not hand out the same
// uid). A reboot ends every sandbox, and with it every lease.
// A lease names the sandbox directory that holds it; a lease whose
// sandbox is gone is taken over by the next allocation.

// hostUIDDir holds the uid leases.
const hostUIDDir = runRoot + "/uids"

// lease is a uid lease file's content.
type lease struct {
	Dir     string    `json:"dir"` // the sandbox's state directory
	Created time.Time `json:"created"`
}

// allocUID leases a free uid from the configured range to the sandbox in
// dir. Errors wrap nothing in particular; callers wrap ErrUnavailable.
func (b *Backend) allocUID(dir string) (int, error) {
	unlock, err := lockLeases()
	if err != nil {
		return 0, err
	}
	defer unlock()
	data, _ := json.Marshal(lease{Dir: dir, Created: time.Now().UTC()})
	for i := 0; i < b.opts.HostUIDCount; i++ {
		uid := b.opts.HostUIDBase + i
		p := filepath.Join(hostUIDDir, strconv.Itoa(uid))
		old, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			continue
		case !leaseStale(old):
			continue
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return 0, fmt.Errorf("write uid lease: %w", err)
		}
		return uid, nil
	}
	return 0, fmt.Errorf("all %d host uids from %d are in use by live sandboxes (raise Options.HostUIDCount)", b.opts.HostUIDCount, b.opts.HostUIDBase)
}

// lockLeases takes the machine-wide lock on the uid leases (a flock on
// runRoot/uids.lock), creating hostUIDDir if needed; unlock releases it.
func lockLeases() (unlock func(), err error) {
	if err := os.MkdirAll(hostUIDDir, 0o700); err != nil {
		return nil, fmt.Errorf("create uid lease directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(hostUIDDir), "uids.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock uid leases: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock uid leases: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	}, nil
}

// leaseStale reports whether a lease's sandbox is gone: its directory
// was removed, or its bubblewrap process exited, or it never got a state
// file within 10 minutes (an opener that died while opening).
func leaseStale(data []byte) bool {
	var l lease
	if json.Unmarshal(data, &l) != nil || l.Dir == "" {
		return true
	}
	if _, err := os.Stat(l.Dir); err != nil {
		return true
	}
	m, err := os.ReadFile(filepath.Join(l.Dir, "sandbox.json"))
	if err != nil {
		return time.Since(l.Created) > 10*time.Minute
	}
	var mt meta
	if json.Unmarshal(m, &mt) != nil {
		return true
	}
	return !procfs.Alive(mt.PID, mt.StartTime)
}

// releaseUID ends dir's lease of uid (if it still holds it).
func releaseUID(uid int, dir string) {
	if uid <= 0 {
		return
	}
	p := filepath.Join(hostUIDDir, strconv.Itoa(uid))
	data, err := os.ReadFile(p)
	if err != nil {
		return
	}
	var l lease
	if json.Unmarshal(data, &l) == nil && l.Dir == dir {
		_ = os.Remove(p)
	}
}

// chownTree gives the directories and the regular files with a single
// link under root to uid/gid. Files with more links are the seed build
// cache's shared, read-only hard links (owned by seedOwner), which stay
// as they are.
func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				return nil
			}
		}
		return os.Lchown(p, uid, uid)
	})
}
