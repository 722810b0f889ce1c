package gate

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The host side: starting a gate, and mapping the ids of its user
// namespace when the caller's own uid is not all it maps.

// UserNS is the user and mount namespace a gate with a memory disk runs
// in. The caller is its root. A sandbox with host ids of its own also has
// Sub (subordinate ids of the caller's, from /etc/subuid and
// /etc/subgid) mapped to Inner, which takes the setuid helpers newuidmap
// and newgidmap (Map); the gate then starts with the capabilities it
// needs in the namespace as ambient ones, since it was not yet the
// namespace's root when it started.
type UserNS struct {
	UID, GID int  // the caller's
	Sub      *IDs // nil: only the caller's ids are mapped
	Inner    int  // what Sub maps to
	// NewUIDMap and NewGIDMap are the helpers' paths (with Sub).
	NewUIDMap, NewGIDMap string
}

// Takes are the ids a gate in ns takes before it becomes its command
// (Plan.UID, Plan.GID): Inner with subordinate ids, else none (0, 0): it
// stays the namespace's root, the caller.
func (ns *UserNS) Takes() (uid, gid int) {
	if ns == nil || ns.Sub == nil {
		return 0, 0
	}
	return ns.Inner, ns.Inner
}

// IDs are a user id and a group id.
type IDs struct{ UID, GID int }

// ambientCaps are what a gate with subordinate ids needs in its user
// namespace: mount (SYS_ADMIN), give the disk to the sandbox's ids
// (CHOWN), take them (SETUID, SETGID), and reach the bound paths as root
// would (DAC_OVERRIDE).
func ambientCaps() []uintptr {
	return []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_CHOWN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_DAC_OVERRIDE}
}

// Command returns the command that starts exe (a runtime server binary,
// or a program that calls local.ServeIfChild) as a gate for p, with the
// environment env, in a session of its own, in ns's namespaces when ns is
// not nil. The caller sets its output and extra files and starts it;
// with ns.Sub set it must then Map the gate's ids before releasing it.
func Command(exe string, p Plan, ns *UserNS, env []string) (*exec.Cmd, error) {
	args, err := p.Args()
	if err != nil {
		return nil, err
	}
	if (p.Disk != nil) != (ns != nil) {
		return nil, errors.New("gate plan: a memory disk needs a user namespace of its own, and only a memory disk does")
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append([]string{}, env...), Env+"=1")
	attr := &syscall.SysProcAttr{Setsid: true}
	if ns != nil {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		if ns.Sub == nil {
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: ns.UID, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: ns.GID, Size: 1}}
		} else {
			attr.AmbientCaps = ambientCaps()
		}
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

// Map writes the id maps of the user namespace of the gate pid, started
// by Command with ns: with ns.Sub set, the caller's ids to 0 and ns.Sub's
// to ns.Inner, with newuidmap and newgidmap side by side; otherwise
// Command wrote them, and Map does nothing.
func Map(ctx context.Context, pid int, ns *UserNS) error {
	if ns == nil || ns.Sub == nil {
		return nil
	}
	maps := []struct {
		tool          string
		caller, inner int
	}{{ns.NewUIDMap, ns.UID, ns.Sub.UID}, {ns.NewGIDMap, ns.GID, ns.Sub.GID}}
	errs := make(chan error, len(maps))
	for _, m := range maps {
		go func() {
			out, err := exec.CommandContext(ctx, m.tool, strconv.Itoa(pid), "0", strconv.Itoa(m.caller), "1",
				strconv.Itoa(ns.Inner), strconv.Itoa(m.inner), "1").CombinedOutput()
			if err != nil {
				err = fmt.Errorf("map %d to %d in the sandbox's user namespace (%s): %w: %s", m.inner, ns.Inner, m.tool, err, strings.TrimSpace(string(out)))
			}
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}
