package cgroups

// A delegated cgroup v2 holds processes. systemd delegates a cgroup to a
// user as a scope or service with Delegate=yes (systemd-run --user
// --scope -p Delegate=yes, or the user's own user@.service), and the
// cgroup starts out holding the process it was made for: the backend's.
// cgroup v2's "no internal processes" rule then refuses to enable the
// memory, pids and cpu controllers for its children (EBUSY). The way out,
// the same as container runtimes take: move the cgroup's processes to a
// leaf child of it (hostLeaf), then enable the controllers; the
// sandboxes' group is the leaf's sibling.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// hostLeaf is the child of a delegated cgroup v2 that its processes (the
// backend's) move to.
const hostLeaf = groupName + "-host"

// enableControllers enables, for dir's children, those of required and
// optional that dir has (its cgroup.controllers) and returns the optional
// ones it enabled; a required one dir lacks is an error naming it. When
// dir holds processes and the caller is not root (dir is delegated to
// it), they move to dir's hostLeaf first. Root's cgroup is left as it
// is: it is not the caller's to rearrange (systemd owns a service's).
func enableControllers(dir string, required, optional []string) (enabled []string, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("read the controllers of %s: %w", dir, err)
	}
	have := strings.Fields(string(data))
	var want []string
	for _, c := range required {
		if !slices.Contains(have, c) {
			return nil, fmt.Errorf("cgroup %s has no %s controller (it has %q): its delegation must include it", dir, c, have)
		}
		want = append(want, "+"+c)
	}
	for _, c := range optional {
		if slices.Contains(have, c) {
			want = append(want, "+"+c)
			enabled = append(enabled, c)
		}
	}
	ctl := filepath.Join(dir, "cgroup.subtree_control")
	err = os.WriteFile(ctl, []byte(strings.Join(want, " ")), 0o644)
	if errors.Is(err, unix.EBUSY) && os.Geteuid() != 0 {
		if err = moveToLeaf(dir); err == nil {
			err = os.WriteFile(ctl, []byte(strings.Join(want, " ")), 0o644)
		}
	}
	if err != nil {
		return nil, err
	}
	return enabled, nil
}

// moveToLeaf moves every process in dir to dir/hostLeaf, until dir holds
// none (a process that forks meanwhile leaves its child behind: one
// more round).
func moveToLeaf(dir string) error {
	leaf := filepath.Join(dir, hostLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make leaf cgroup %s for the processes of delegated cgroup %s: %w", leaf, dir, err)
	}
	for range 10 {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("list the processes of %s: %w", dir, err)
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0o644)
			if err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: it exited
				return fmt.Errorf("move process %s from delegated cgroup %s to %s: %w", pid, dir, leaf, err)
			}
		}
	}
	return fmt.Errorf("delegated cgroup %s keeps gaining processes: cannot move them all to %s", dir, leaf)
}
