package local

import "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"

// DelegateCgroups is the one-time setup (per boot) that lets a user other
// than root run sandboxes with memory, task and CPU limits on a cgroup v1
// host: run as root, it makes a group of the user's at the top of each
// v1 hierarchy and gives it to uid and gid; the user's backends then make
// their sandboxes' cgroups in it. It returns the group directories and is
// idempotent. On cgroup v2 it refuses: a user gets a delegated cgroup
// from its systemd there, which New asks for (a transient scope with
// Delegate=yes; docs/local-backend.md, "Without root").
func DelegateCgroups(uid, gid int) ([]string, error) { return cgroups.Delegate(uid, gid) }

// CgroupV1 reports whether this host has cgroup v1 memory and pids
// hierarchies, where a user gets cgroups from root (DelegateCgroups, the
// one-time Setup); on cgroup v2 systemd delegates one per program.
func CgroupV1() bool { return cgroups.V1() }
