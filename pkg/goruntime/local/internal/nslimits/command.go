package nslimits

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SandboxCommand returns a command that runs args as the sandbox process
// pid runs (its user and mount namespaces, its uid and gid there), so it
// sees the sandbox's own file tree (/app, HOME) and can do there exactly
// what the sandbox's processes can, nothing more. As root nsenter joins
// them directly; as a user, from the user namespace the user owns that
// holds the sandbox's (enter.go), with a second nsenter that joins the
// sandbox's from there. The caller wires its input and output, runs it,
// and then calls done, which closes the descriptors it inherited.
//
// The process is pinned, not named: its /proc directory is opened first
// and its namespaces through it, and inSandbox (the caller's check that
// pid is one of the sandbox's processes, e.g. in its cgroup) runs after;
// the directory still answering after that check proves the check saw
// the same process. So a pid the host reused after the sandbox's process
// died never leads nsenter into another process's namespaces.
func SandboxCommand(ctx context.Context, pid int, inSandbox func(pid int) error, args ...string) (cmd *exec.Cmd, done func(), err error) {
	dir, err := os.Open("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return nil, nil, fmt.Errorf("find process %d: %w", pid, err)
	}
	defer dir.Close()
	var files []*os.File
	done = func() {
		for _, f := range files {
			f.Close()
		}
	}
	fail := func(err error) (*exec.Cmd, func(), error) {
		done()
		return nil, nil, err
	}
	user, err := openIn(dir, "ns/user")
	if err != nil {
		return fail(err)
	}
	files = append(files, user)
	mnt, err := openIn(dir, "ns/mnt")
	if err != nil {
		return fail(err)
	}
	files = append(files, mnt)
	uid, err := innerID(dir, "uid")
	if err != nil {
		return fail(err)
	}
	gid, err := innerID(dir, "gid")
	if err != nil {
		return fail(err)
	}
	if err := inSandbox(pid); err != nil {
		return fail(fmt.Errorf("process %d: %w", pid, err))
	}
	if _, err := readIn(dir, "stat"); err != nil {
		return fail(fmt.Errorf("process %d ended while its namespaces were opened: %w", pid, err))
	}
	// The child's descriptors 3, 4, ... are files in order.
	childFD := func(f *os.File) string {
		for i, g := range files {
			if g == f {
				return "/proc/self/fd/" + strconv.Itoa(3+i)
			}
		}
		panic("nslimits: not a file passed to the child")
	}
	var owner *os.File
	if os.Geteuid() != 0 {
		if owner, err = ownerOf("/proc/self/fd/" + strconv.Itoa(int(user.Fd()))); err != nil {
			return fail(fmt.Errorf("enter the namespaces of process %d: %w", pid, err))
		}
		files = append(files, owner)
	}
	setpriv, err := needsSetpriv(dir)
	if err != nil {
		return fail(err)
	}
	join := enterAs(childFD(user), childFD(mnt), uid, gid, setpriv)
	if owner != nil {
		join = append([]string{"nsenter", "--user=" + childFD(owner), "--preserve-credentials", "--"}, join...)
	}
	cmd = exec.CommandContext(ctx, join[0], append(join[1:], args...)...)
	cmd.Env = []string{"PATH=" + toolPath, "LC_ALL=C"}
	cmd.ExtraFiles = files
	return cmd, done, nil
}

// needsSetpriv reports whether the process of the /proc directory dir is
// entered through setpriv rather than nsenter's --setuid and --setgid: a
// namespace that denies setgroups (bubblewrap's, made without
// subordinate ids) refuses the setgroups nsenter makes before --setgid.
// Its processes kept their supplementary groups, so they are become the
// way they are: the same ids, the groups kept. Only for a sandbox that
// runs as this process's own uid, which the namespace maps to the
// sandbox's: setpriv then takes the ids it has already. A sandbox of
// host ids of its own (root's, or a user's subordinate ids) does not map
// this process's uid, so setpriv would start with no capability left to
// take them (setresuid: EPERM); there nsenter drops the groups before it
// enters the namespace (as root, or as the root of the user's namespace,
// which allows setgroups) and lets the later refusal pass.
func needsSetpriv(dir *os.File) (bool, error) {
	groups, err := readIn(dir, "setgroups")
	if err != nil {
		return false, fmt.Errorf("read the process's setgroups: %w", err)
	}
	own, err := runsAsCaller(dir)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(groups)) == "deny" && own, nil
}

// enterAs is the command line that joins the user namespace user and the
// mount namespace mnt (paths as the child sees them) as uid and gid
// there, through setpriv when setpriv (needsSetpriv); the command to run
// follows it.
func enterAs(user, mnt string, uid, gid int, setpriv bool) []string {
	if setpriv {
		return []string{"nsenter", "--user=" + user, "--mount=" + mnt, "--preserve-credentials", "--",
			"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--keep-groups", "--"}
	}
	return []string{"nsenter", "--user=" + user, "--mount=" + mnt,
		"--setuid=" + strconv.Itoa(uid), "--setgid=" + strconv.Itoa(gid), "--"}
}

// openIn opens the file name under the /proc/<pid> directory dir: the
// process dir was opened for, or an error (ESRCH) once it has ended.
func openIn(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", dir.Name(), name, err)
	}
	return os.NewFile(uintptr(fd), dir.Name()+"/"+name), nil
}

// readIn reads the file name under the /proc/<pid> directory dir.
func readIn(dir *os.File, name string) ([]byte, error) {
	f, err := openIn(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return data, nil
}

// innerID is the id (kind "uid" or "gid") the process of the /proc
// directory dir has in its
// own user namespace: the first field of the line of its id map that
// holds its id as this process sees it.
// runsAsCaller reports whether the process of dir runs as this
// process's effective uid, as this process sees it.
func runsAsCaller(dir *os.File) (bool, error) {
	status, err := readIn(dir, "status")
	if err != nil {
		return false, fmt.Errorf("read the process's ids: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[2])
			return err == nil && uid == os.Geteuid(), nil
		}
	}
	return false, fmt.Errorf("read the process's ids: no Uid line")
}

func innerID(dir *os.File, kind string) (int, error) {
	status, err := readIn(dir, "status")
	if err != nil {
		return 0, fmt.Errorf("read the process's ids: %w", err)
	}
	field := map[string]string{"uid": "Uid:", "gid": "Gid:"}[kind]
	outer := -1
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == field {
			outer, _ = strconv.Atoi(f[2]) // effective
		}
	}
	m, err := readIn(dir, kind+"_map")
	if err != nil || outer < 0 {
		return 0, fmt.Errorf("read the process's %s map: %v", kind, err)
	}
	for _, line := range strings.Split(string(m), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, _ := strconv.Atoi(f[0])
		out, _ := strconv.Atoi(f[1])
		n, _ := strconv.Atoi(f[2])
		if outer >= out && outer-out < n {
			return in + outer - out, nil
		}
	}
	return 0, fmt.Errorf("%s %d of %s is not in its %s map", kind, outer, dir.Name(), kind)
}
