package local

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"golang.org/x/sys/unix"
)

// Host leftovers of sandboxes that no longer exist. Close and New's prune
// of a dead sandbox (spare.go) remove a sandbox's cgroup and uid lease by
// what its sandbox.json names; when that file is gone too (its state
// directory was removed with rm -rf, as a test's temporary one is), nothing
// names them any more, and they piled up: an empty cgroup per sandbox in
// each hierarchy, a lease file per uid. Every New's prune removes them
// here, each only when provably unused:
//   - pruneCgroups: a cgroup under our group with no tasks, no sandbox
//     directory of this state directory by its name, older than
//     leftoverAge (several state directories share the group; a younger
//     one may be another backend's sandbox being opened). The kernel
//     refuses to rmdir a cgroup that holds a task or a child group, and
//     nothing here forces it.
//   - pruneLeases: a uid lease whose sandbox directory is gone and whose
//     uid no process on the host runs as, under the allocator's lock.

// leftoverAge is how old an empty cgroup must be before prune removes it.
const leftoverAge = 10 * time.Minute

// sandboxGroups returns the directories that hold one cgroup per sandbox
// (groupLayout), none when they cannot be found.
func sandboxGroups() []string {
	l, err := findGroupLayout()
	if err != nil {
		return nil
	}
	return l.dirs()
}

// pruneCgroups removes the empty cgroups in groups (see sandboxGroups)
// named by a sandbox id that has no directory under sandboxes and created
// more than leftoverAge ago.
func pruneCgroups(sandboxes string, groups []string) {
	for _, g := range groups {
		entries, err := os.ReadDir(g)
		if err != nil {
			continue
		}
		for _, e := range entries {
			id := e.Name()
			if !e.IsDir() || !sandboxid.Valid(id) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(sandboxes, id)); !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			info, err := e.Info()
			if err != nil || time.Since(info.ModTime()) < leftoverAge {
				continue
			}
			dir := filepath.Join(g, id)
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil || strings.TrimSpace(string(procs)) != "" {
				continue
			}
			// Fails with EBUSY if a task or a child group arrived meanwhile.
			_ = unix.Rmdir(dir)
		}
	}
}

// pruneLeases removes, under the allocator's lock (lockLeases), the uid
// leases in hostUIDDir whose sandbox directory no longer exists and whose
// uid no process on the host runs as (real, effective, saved or file
// system uid). A lease it cannot read or parse is left to allocUID, which
// takes it over.
func pruneLeases() {
	entries, err := os.ReadDir(hostUIDDir)
	if err != nil || len(entries) == 0 {
		return
	}
	unlock, err := lockLeases()
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
		p := filepath.Join(hostUIDDir, e.Name())
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
