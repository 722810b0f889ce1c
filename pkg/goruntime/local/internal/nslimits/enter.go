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

// How the host gets into a sandbox's namespaces to set a limit: nsenter(1)
// runs a command there (never this process: a Go thread that joined a
// namespace cannot always be given back).
//
// As root, nsenter joins the namespace directly. A user other than root
// may join it only from the user namespace that owns it: bubblewrap's
// outer one, which the user made and so holds every capability in. The
// sandbox's own processes sit in a user namespace nested in that one
// (--disable-userns), where they hold none over it. The owner is asked of
// the namespace itself (NS_GET_USERNS) and handed to nsenter as a
// descriptor, with --preserve-credentials: the outer namespace maps only
// the user, and nsenter must not try to become someone else there.

// run runs args in the namespace kind ("net", "mnt") of the sandbox
// whose process pid is inside it, with stdin, and returns its output.
func run(ctx context.Context, pid int, kind string, stdin io.Reader, args ...string) (string, error) {
	nsPath := "/proc/" + strconv.Itoa(pid) + "/ns/" + kind
	flag := map[string]string{"net": "--net=", "mnt": "--mount="}[kind]
	if flag == "" {
		return "", fmt.Errorf("no namespace kind %q", kind)
	}
	nsenter := []string{flag + nsPath}
	var owner *os.File
	if os.Geteuid() != 0 {
		var err error
		if owner, err = ownerOf(nsPath); err != nil {
			return "", err
		}
		defer owner.Close()
		nsenter = append([]string{"--user=/proc/self/fd/3", "--preserve-credentials"}, nsenter...)
	}
	cmd := exec.CommandContext(ctx, "nsenter", append(append(nsenter, "--"), args...)...)
	cmd.Env = []string{"PATH=" + toolPath}
	cmd.Stdin = stdin
	if owner != nil {
		cmd.ExtraFiles = []*os.File{owner}
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// ownerOf opens the user namespace that owns the namespace at nsPath.
func ownerOf(nsPath string) (*os.File, error) {
	ns, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's namespace: %w", err)
	}
	defer ns.Close()
	fd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return nil, fmt.Errorf("find the user namespace that owns %s (NS_GET_USERNS): %w", nsPath, err)
	}
	return os.NewFile(uintptr(fd), "userns-of-"+nsPath), nil
}
