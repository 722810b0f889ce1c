package cgroups

// Cgroups of sandboxes that no longer exist. Close and New's prune of a
// dead sandbox remove a sandbox's cgroup by what its sandbox.json names;
// when that file is gone too (its state directory was removed with rm -rf,
// as a test's temporary one is), nothing names the cgroup any more, and
// an empty one per sandbox piled up in each hierarchy.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// leftoverAge is how old an empty cgroup must be before prune removes it.
const leftoverAge = 10 * time.Minute

// PruneLeftovers removes the empty cgroups in this process's group
// directories (layout) named by a sandbox ID that has no directory under
// sandboxes (a state directory's sandboxes/) and created more than
// leftoverAge ago: several state directories share the group, and a
// younger one may be another backend's sandbox being opened. The kernel
// refuses to rmdir a cgroup that holds a task or a child group, and
// nothing here forces it. It does nothing when the layout cannot be found.
func PruneLeftovers(sandboxes string) {
	l, err := findLayout()
	if err != nil {
		return
	}
	prune(sandboxes, l.dirs())
}

// prune is PruneLeftovers over the group directories groups.
func prune(sandboxes string, groups []string) {
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

// ByID is the cgroup a sandbox named id gets in this process's layout:
// for a sandbox whose sandbox.json (which names its cgroup) was never
// written. Removing it is harmless when it does not exist.
func ByID(id string) (*Cgroup, error) {
	l, err := findLayout()
	if err != nil {
		return nil, err
	}
	if l.v1 == nil {
		d := filepath.Join(l.v2, id)
		return &Cgroup{V2: true, Memory: d, Pids: d, CPU: d}, nil
	}
	cg := &Cgroup{}
	for c, dst := range map[string]*string{"memory": &cg.Memory, "pids": &cg.Pids, "cpu": &cg.CPU} {
		if g := l.v1[c]; g != "" {
			*dst = filepath.Join(g, id)
		}
	}
	return cg, nil
}
