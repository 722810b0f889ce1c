package cgroups

// Where the sandboxes' cgroups live: the mounted hierarchies (v1 or v2)
// and this process's own cgroup, below which they are made.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mountedControllers finds where the cgroup hierarchies are mounted.
// For v1 it maps controller name to mount point; v2 is the cgroup2 mount.
func mountedControllers() (v1 map[string]string, v2 string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	v1 = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields)+1 || len(fields) < 5 {
			continue
		}
		fstype, mnt := fields[sep+1], fields[4]
		switch fstype {
		case "cgroup2":
			if v2 == "" {
				v2 = mnt
			}
		case "cgroup":
			if sep+3 < len(fields) {
				for _, o := range strings.Split(fields[sep+3], ",") {
					if o == "memory" || o == "pids" || o == "cpu" {
						if _, ok := v1[o]; !ok {
							v1[o] = mnt
						}
					}
				}
			}
		}
	}
	return v1, v2, sc.Err()
}

// ownCgroups reads /proc/self/cgroup: controller (or "" for v2) -> path.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// layout is where the sandboxes' cgroups live: one directory,
// groupName below the caller's own cgroup, holding a cgroup per sandbox
// (named by its ID), per v1 hierarchy or in the v2 tree. Exactly one of v1
// and v2 is set.
type layout struct {
	v1    map[string]string // v1 controller (memory, pids, cpu if mounted) -> group directory
	v2    string            // the v2 group directory
	v2Own string            // the caller's own v2 cgroup, the group's parent
}

// findLayout finds the layout of this process: v1 when the
// memory and pids hierarchies are mounted (for a user other than root,
// the groups root delegated to it, when there are: delegate.go), else v2.
func findLayout() (layout, error) {
	mounts, unified, err := mountedControllers()
	if err != nil {
		return layout{}, fmt.Errorf("find cgroup mounts: %w", err)
	}
	own, err := ownCgroups()
	if err != nil {
		return layout{}, fmt.Errorf("read own cgroups: %w", err)
	}
	if mounts["memory"] != "" && mounts["pids"] != "" {
		if os.Geteuid() != 0 {
			if groups := delegatedV1(mounts, os.Geteuid()); groups != nil {
				return layout{v1: groups}, nil
			}
		}
		v1 := map[string]string{}
		for _, c := range []string{"memory", "pids", "cpu"} {
			if mounts[c] != "" {
				v1[c] = filepath.Join(mounts[c], own[c], groupName)
			}
		}
		return layout{v1: v1}, nil
	}
	if unified != "" {
		ownDir := filepath.Join(unified, own[""])
		if filepath.Base(ownDir) == hostLeaf {
			// Moved there by an earlier New (v2leaf.go): the delegated
			// cgroup is its parent.
			ownDir = filepath.Dir(ownDir)
		}
		return layout{v2: filepath.Join(ownDir, groupName), v2Own: ownDir}, nil
	}
	return layout{}, errors.New("no cgroup memory and pids controllers are mounted (need cgroup v1 memory+pids hierarchies or cgroup v2 at /sys/fs/cgroup)")
}

// dirs lists the layout's group directories.
func (l layout) dirs() []string {
	if l.v1 == nil {
		return []string{l.v2}
	}
	var dirs []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if l.v1[c] != "" {
			dirs = append(dirs, l.v1[c])
		}
	}
	return dirs
}
