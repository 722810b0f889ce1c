package cgroups

// Cgroups for a user who is not root. On cgroup v2 a user gets a
// delegated cgroup from its systemd (a scope with Delegate=yes, which
// JoinSystemdScope asks for, systemd.go), and the layout below the
// caller's own cgroup works as is. cgroup v1 has no delegation of its own: there root makes a group
// per user once at the top of each hierarchy (memory, pids, cpu) and
// gives it to the user (Delegate), who may then make a cgroup per
// sandbox in it and set its limits. The kernel checks that a process
// moved into one belongs to the user. The groups live until reboot.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// userGroupName is the name of the v1 group root delegates to uid.
func userGroupName(uid int) string { return groupName + "-uid-" + strconv.Itoa(uid) }

// Delegate makes, as root, the cgroup v1 group of uid in each mounted
// memory, pids and cpu hierarchy and gives it to uid and gid. It returns
// the group directories. It is idempotent. On cgroup v2 it refuses and
// names systemd's delegation, which is how a user gets a cgroup there.
func Delegate(uid, gid int) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("delegating cgroups to a user needs root (run it with sudo)")
	}
	mounts, _, err := mountedControllers()
	if err != nil {
		return nil, fmt.Errorf("find cgroup mounts: %w", err)
	}
	if mounts["memory"] == "" || mounts["pids"] == "" {
		return nil, errors.New("this host has cgroup v2 (no v1 memory and pids hierarchies): a user gets a delegated cgroup from systemd instead, " +
			"which the backend asks for itself (or start the program under systemd-run --user --scope -p Delegate=yes)")
	}
	var dirs []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if mounts[c] == "" {
			continue
		}
		dir := filepath.Join(mounts[c], userGroupName(uid))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return dirs, fmt.Errorf("create cgroup v1 %s group %s: %w", c, dir, err)
		}
		// The directory lets the user make and remove sandboxes' cgroups
		// in it (whose files are then the user's); cgroup.procs and tasks
		// let it move its own processes in.
		for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "tasks")} {
			if err := os.Chown(p, uid, gid); err != nil {
				return dirs, fmt.Errorf("give cgroup %s to uid %d: %w", p, uid, err)
			}
		}
		// The weight of the user's sandboxes together against the rest of
		// the host, which the user may not set itself (it could raise it
		// past what its own processes may have): one process at nice 0,
		// the most any of the user's processes gets without privilege
		// (weight.go).
		if c == "cpu" {
			p := filepath.Join(dir, "cpu.shares")
			if err := os.WriteFile(p, []byte(groupWeight(false, NiceWeight(0))), 0o644); err != nil {
				return dirs, fmt.Errorf("set the CPU weight of %s: %w", dir, err)
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// DelegationNeeded reports whether uid needs root's Delegate on this
// host to get cgroups: a user other than root on a cgroup v1 host whose
// groups root has not made yet (this boot). On cgroup v2 nothing root
// does once helps (systemd delegates a cgroup per program), so it is
// false there.
func DelegationNeeded(uid int) bool {
	if uid == 0 {
		return false
	}
	mounts, _, err := mountedControllers()
	if err != nil || mounts["memory"] == "" || mounts["pids"] == "" {
		return false
	}
	return delegatedV1(mounts, uid) == nil
}

// V1 reports whether this host has the cgroup v1 memory and pids
// hierarchies, where a user gets cgroups by root's Delegate (on v2, from
// systemd).
func V1() bool {
	mounts, _, err := mountedControllers()
	return err == nil && mounts["memory"] != "" && mounts["pids"] != ""
}

// delegatedV1 returns the v1 groups root delegated to uid (controller ->
// directory), or nil when there are none or they are not uid's.
func delegatedV1(mounts map[string]string, uid int) map[string]string {
	groups := map[string]string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if mounts[c] == "" {
			continue
		}
		dir := filepath.Join(mounts[c], userGroupName(uid))
		if !ownedBy(dir, uid) {
			if c == "cpu" {
				continue // the cpu controller is optional
			}
			return nil
		}
		groups[c] = dir
	}
	return groups
}

// ownedBy reports whether dir is a directory owned by uid.
func ownedBy(dir string, uid int) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
