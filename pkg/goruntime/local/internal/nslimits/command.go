package nslimits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// SandboxCommand returns a command that runs args as the sandbox process
// pid runs (its user and mount namespaces, its uid and gid there), so it
// sees the sandbox's own file tree (/app, HOME) and can do there exactly
// what the sandbox's processes can, nothing more. As root nsenter joins
// them directly; as a user, from the user namespace the user owns that
// holds the sandbox's (enter.go), with a second nsenter that joins the
// sandbox's from there. The caller wires its input and output, runs it,
// and then calls done, which closes the descriptor it inherited.
func SandboxCommand(ctx context.Context, pid int, args ...string) (cmd *exec.Cmd, done func(), err error) {
	proc := "/proc/" + strconv.Itoa(pid)
	uid, err := innerID(proc, "uid")
	if err != nil {
		return nil, nil, err
	}
	gid, err := innerID(proc, "gid")
	if err != nil {
		return nil, nil, err
	}
	join := []string{"nsenter", "--user=" + proc + "/ns/user", "--mount=" + proc + "/ns/mnt",
		"--setuid=" + strconv.Itoa(uid), "--setgid=" + strconv.Itoa(gid), "--"}
	var owner *os.File
	if os.Geteuid() != 0 {
		if owner, err = ownerOf(proc + "/ns/user"); err != nil {
			return nil, nil, fmt.Errorf("enter the namespaces of process %d: %w", pid, err)
		}
		join = append([]string{"nsenter", "--user=/proc/self/fd/3", "--preserve-credentials", "--"}, join...)
	}
	cmd = exec.CommandContext(ctx, join[0], append(join[1:], args...)...)
	cmd.Env = []string{"PATH=" + toolPath, "LC_ALL=C"}
	done = func() {}
	if owner != nil {
		cmd.ExtraFiles = []*os.File{owner}
		done = func() { owner.Close() }
	}
	return cmd, done, nil
}

// innerID is the id (kind "uid" or "gid") the process at proc has in its
// own user namespace: the first field of the line of its id map that
// holds its id as this process sees it.
func innerID(proc, kind string) (int, error) {
	status, err := os.ReadFile(proc + "/status")
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
	m, err := os.ReadFile(proc + "/" + kind + "_map")
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
	return 0, fmt.Errorf("%s %d of %s is not in its %s map", kind, outer, proc, kind)
}
