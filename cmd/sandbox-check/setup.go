package main

import (
	"fmt"
	"io"
	"os/user"
	"strconv"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// setupUser delegates cgroups to who (a user name or uid) and says what it
// did. It returns the exit status.
func setupUser(who string, stdout, stderr io.Writer) int {
	u, err := user.Lookup(who)
	if err != nil {
		if u, err = user.LookupId(who); err != nil {
			fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: no such user or uid\n", who)
			return 2
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: uid %q or gid %q is not a number\n", who, u.Uid, u.Gid)
		return 2
	}
	dirs, err := local.DelegateCgroups(uid, gid)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-check: --setup-user=%s: %v\n", who, err)
		return 1
	}
	fmt.Fprintf(stdout, "cgroups delegated to %s (uid %d):\n", u.Username, uid)
	for _, d := range dirs {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	fmt.Fprintf(stdout, "Sandboxes %s starts now get memory, task and CPU limits in them. The groups last until reboot: run this again after one (e.g. from a boot script).\n", u.Username)
	return 0
}
