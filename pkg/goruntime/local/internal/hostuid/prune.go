package hostuid

// Leases of sandboxes that no longer exist. Close and New's prune of a
// dead sandbox release a sandbox's lease by what its sandbox.json names;
// when that file is gone too (its state directory was removed with rm -rf,
// as a test's temporary one is), nothing names the lease any more, and a
// lease file per uid piled up. Every New's prune removes them here, each
// only when provably unused.

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PruneLeases removes, under the allocator's lock, the uid leases in
// leases whose sandbox directory no longer exists and whose uid no process
// on the host runs as (real, effective, saved or file system uid). A
// lease it cannot read or parse is left to Alloc, which takes it over.
func PruneLeases(leases string) {
	entries, err := os.ReadDir(leases)
	if err != nil || len(entries) == 0 {
		return
	}
	unlock, err := lock(leases)
	if err != nil {
		return
	}
	defer unlock()
	var running map[int]bool // read once, when a lease's directory is gone
	for _, e := range entries {
		uid, err := strconv.Atoi(e.Name())
		if err != nil || uid <= 0 {
			continue
		}
		p := filepath.Join(leases, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(data, &l) != nil || l.Dir == "" {
			continue
		}
		if _, err := os.Lstat(l.Dir); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if running == nil {
			if running = processUIDs("/proc"); running == nil {
				return // cannot tell who runs: remove nothing
			}
		}
		if !running[uid] {
			_ = os.Remove(p)
		}
	}
}

// processUIDs returns every uid a process under procDir runs as (the
// four of each /proc/<pid>/status "Uid:" line), or nil when procDir
// cannot be read.
func processUIDs(procDir string) map[int]bool {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	uids := map[int]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join(procDir, e.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
				for _, u := range strings.Fields(rest) {
					if n, err := strconv.Atoi(u); err == nil {
						uids[n] = true
					}
				}
				break
			}
		}
		f.Close()
	}
	return uids
}

// ReleaseUnder removes, under the allocator's lock, the uid leases in
// leases held by a sandbox directory under parent (a state directory's
// sandboxes/), whose processes the caller has ended, and returns how many.
func ReleaseUnder(leases, parent string) int {
	entries, err := os.ReadDir(leases)
	if err != nil || len(entries) == 0 {
		return 0
	}
	unlock, err := lock(leases)
	if err != nil {
		return 0
	}
	defer unlock()
	prefix := filepath.Clean(parent) + "/"
	n := 0
	for _, e := range entries {
		p := filepath.Join(leases, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(data, &l) != nil || !strings.HasPrefix(l.Dir, prefix) {
			continue
		}
		if os.Remove(p) == nil {
			n++
		}
	}
	return n
}
