package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// setupUser takes, as root, the one-time setup for who (a user name or
// uid: local.Setup) and says what it did. It returns the exit status.
func setupUser(who string, opts local.Options, stdout, stderr io.Writer) int {
	u, err := user.Lookup(who)
	if err != nil {
		if u, err = user.LookupId(who); err != nil {
			fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: no such user or uid\n", who)
			return cliflags.ExitUsage
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: uid %q or gid %q is not a number\n", who, u.Uid, u.Gid)
		return cliflags.ExitUsage
	}
	steps, err := local.Setup(uid, gid, opts)
	for _, s := range steps {
		fmt.Fprintf(stdout, "done: %s\n", s.What)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: %v\n", who, err)
		return 1
	}
	if len(steps) == 0 {
		fmt.Fprintf(stdout, "Nothing to set up for %s (uid %d): the host settings and cgroups root can give are in place.\n", u.Username, uid)
	} else {
		fmt.Fprintf(stdout, "Set up for %s (uid %d).", u.Username, uid)
		if slices.ContainsFunc(steps, func(s local.SetupStep) bool { return slices.Contains(s.Protections, local.ProtCgroupMemory) }) {
			fmt.Fprint(stdout, " Cgroup groups last until reboot: run this again after one (e.g. from a boot script).")
		}
		fmt.Fprintln(stdout)
	}
	if uid != 0 && !local.CgroupV1() {
		fmt.Fprintf(stdout, "This host has cgroup v2: %s gets cgroups from systemd instead, by starting the program as systemd-run --user --scope -p Delegate=yes <command>.\n", u.Username)
	}
	return 0
}

// setupNeeded prints, one a line, what the one-time setup would do for the
// caller (nothing when nothing): scripts/host-setup.sh asks sudo only then.
func setupNeeded(opts local.Options, stdout io.Writer) int {
	for _, s := range local.SetupNeeded(os.Geteuid(), opts) {
		fmt.Fprintln(stdout, s.What)
	}
	return 0
}
