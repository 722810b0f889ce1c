// Package hostuid is what a sandbox needs on the host to run as a host uid
// (and gid, the same number) of its own, as the local backend's sandboxes
// do when it runs as root, like isolate's box ids: a lease on a uid from a
// range, machine-wide (lease.go, prune.go), its files given to it
// (chown.go), and read-only stagings of the paths bubblewrap binds that
// such a uid could not reach (stage.go).
//
// Bubblewrap is started as that uid, so the sandbox's uid 1000 maps to
// it: files the sandbox writes belong to it on the host, and a process
// that left the sandbox's mount namespace would still be an unprivileged
// stranger to every other sandbox's files (each sandbox's directories are
// mode 0700, owned by its own uid, below the root-only state directory).
//
// Leases live in a directory (the backend's runRoot/uids), one file per
// uid in use, machine-wide: two backends with different state directories
// must not hand out the same uid. A reboot ends every sandbox, and with it
// every lease. A lease names the sandbox directory that holds it; a lease
// whose sandbox is gone is taken over by the next allocation. Every
// function takes the leases' directory as a parameter; nothing here is
// global.
package hostuid

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
)

// lease is a uid lease file's content.
type lease struct {
	Dir     string    `json:"dir"` // the sandbox's state directory
	Created time.Time `json:"created"`
}

// ErrRangeFull is wrapped by Alloc's error when every uid of the range is
// leased to a live sandbox.
var ErrRangeFull = errors.New("host uid range full")

// Alloc leases a free uid from base..base+count-1 in leases to the sandbox
// in dir: the lowest with no lease, found with one read of the leases'
// directory however many sandboxes live; failing that, the first whose
// lease is stale: its sandbox directory was removed, or alive (given the
// directory and when the lease was taken) reports it dead. When none is
// free the error wraps ErrRangeFull and names the setting to raise.
func Alloc(leases, dir string, base, count int, alive func(dir string, leased time.Time) bool) (int, error) {
	unlock, err := lock(leases)
	if err != nil {
		return 0, err
	}
	defer unlock()
	data, _ := json.Marshal(lease{Dir: dir, Created: time.Now().UTC()})
	entries, err := os.ReadDir(leases)
	if err != nil {
		return 0, fmt.Errorf("list uid leases: %w", err)
	}
	leased := make(map[int]bool, len(entries))
	for _, e := range entries {
		if uid, err := strconv.Atoi(e.Name()); err == nil {
			leased[uid] = true
		}
	}
	for i := 0; i < count; i++ {
		if uid := base + i; !leased[uid] {
			if err := os.WriteFile(filepath.Join(leases, strconv.Itoa(uid)), data, 0o600); err != nil {
				return 0, fmt.Errorf("write uid lease: %w", err)
			}
			return uid, nil
		}
	}
	for i := 0; i < count; i++ {
		uid := base + i
		p := filepath.Join(leases, strconv.Itoa(uid))
		old, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			continue
		case !stale(old, alive):
			continue
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return 0, fmt.Errorf("write uid lease: %w", err)
		}
		return uid, nil
	}
	return 0, fmt.Errorf("%w: all %d host uids from %d are leased to live sandboxes, one each", ErrRangeFull, count, base)
}

// lock takes the machine-wide lock on the uid leases (a flock on
// uids.lock beside the leases' directory), creating leases if needed;
// unlock releases it.
func lock(leases string) (unlock func(), err error) {
	if err := os.MkdirAll(leases, 0o700); err != nil {
		return nil, fmt.Errorf("create uid lease directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(leases), "uids.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock uid leases: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock uid leases: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// stale reports whether a lease's sandbox is gone: the lease cannot be
// read, its directory was removed, or alive says so.
func stale(data []byte, alive func(dir string, leased time.Time) bool) bool {
	var l lease
	if json.Unmarshal(data, &l) != nil || l.Dir == "" {
		return true
	}
	if _, err := os.Stat(l.Dir); err != nil {
		return true
	}
	return !alive(l.Dir, l.Created)
}

// Release ends dir's lease of uid in leases (if it still holds it).
func Release(leases string, uid int, dir string) {
	if uid <= 0 {
		return
	}
	p := filepath.Join(leases, strconv.Itoa(uid))
	data, err := os.ReadFile(p)
	if err != nil {
		return
	}
	var l lease
	if json.Unmarshal(data, &l) == nil && l.Dir == dir {
		_ = os.Remove(p)
	}
}
