package nslimits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// MountCommand returns a command that runs args in the mount namespace of
// the sandbox whose process pid is inside it, with every capability over
// the sandbox's files: as root directly, as a user from the user namespace
// that owns the sandbox's (enter.go says which and why). The caller
// wires its input and output, runs it, and then calls done, which closes
// the descriptor the command inherited.
func MountCommand(ctx context.Context, pid int, args ...string) (cmd *exec.Cmd, done func(), err error) {
	nsPath := "/proc/" + strconv.Itoa(pid) + "/ns/mnt"
	nsenter := []string{"--mount=" + nsPath}
	var owner *os.File
	if os.Geteuid() != 0 {
		if owner, err = ownerOf(nsPath); err != nil {
			return nil, nil, fmt.Errorf("enter the mount namespace of process %d: %w", pid, err)
		}
		nsenter = append([]string{"--user=/proc/self/fd/3", "--preserve-credentials"}, nsenter...)
	}
	cmd = exec.CommandContext(ctx, "nsenter", append(append(nsenter, "--"), args...)...)
	cmd.Env = []string{"PATH=" + toolPath, "LC_ALL=C"}
	done = func() {}
	if owner != nil {
		cmd.ExtraFiles = []*os.File{owner}
		done = func() { owner.Close() }
	}
	return cmd, done, nil
}
