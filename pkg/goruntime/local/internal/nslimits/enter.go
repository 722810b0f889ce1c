package nslimits

import (
	"context"
	"fmt"
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
// may join it only from a user namespace that the user made, and so holds
// every capability in, and that is or holds the one owning it: the
// outermost of the sandbox's, the one a memory disk's gate made (where
// the user is uid 0), or bubblewrap's outer one when there is no gate.
// The sandbox's own processes sit in a user namespace nested in those
// (--disable-userns), where they hold none over them. The owner is asked
// of the namespace itself (NS_GET_USERNS), walked up (NS_GET_PARENT) to
// the child of this process's own, and handed to nsenter as a
// descriptor, with --preserve-credentials: those namespaces map the user
// alone, and nsenter must not try to become someone else there. (A
// sandbox with subordinate ids of its own has bubblewrap's outer
// namespace map them, not the user: joined there, the user would be
// nobody, whom mount(8) refuses.)

// run runs args in the namespace kind ("net", "mnt") of the sandbox
// whose process pid is inside it and returns its output.
func run(ctx context.Context, pid int, kind string, args ...string) (string, error) {
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
	if owner != nil {
		cmd.ExtraFiles = []*os.File{owner}
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// ownerOf opens the user namespace, a child of this process's own, that
// owns the namespace at nsPath or holds the one that does.
func ownerOf(nsPath string) (*os.File, error) {
	ns, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's namespace: %w", err)
	}
	defer ns.Close()
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &self); err != nil {
		return nil, fmt.Errorf("find this process's user namespace: %w", err)
	}
	fd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return nil, fmt.Errorf("find the user namespace that owns %s (NS_GET_USERNS): %w", nsPath, err)
	}
	for range 32 { // user namespaces nest at most 32 deep
		parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("find the user namespace that holds the owner of %s (NS_GET_PARENT): %w", nsPath, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(parent, &st); err != nil || (st.Dev == self.Dev && st.Ino == self.Ino) {
			unix.Close(parent)
			return os.NewFile(uintptr(fd), "userns-of-"+nsPath), err
		}
		unix.Close(fd)
		fd = parent
	}
	unix.Close(fd)
	return nil, fmt.Errorf("the user namespace that owns %s is not below this process's", nsPath)
}
