package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// The one-time host setup: what root does once (per boot) so that a user's
// sandboxes get every protection root can give them. cmd/sandbox-check
// --setup-user does it, scripts/host-setup.sh asks sudo for it (make demo,
// make deps), and sandbox-check run as the user names it as the one command
// that adds what is missing.

// SetupCommand is the one-time setup for the user name as a command line
// to paste as it is printed: sudo and the absolute path of a
// sandbox-check binary (sudo's PATH has neither the user's bin
// directories nor go), found next to this program (make build puts every
// binary in bin/) or on PATH. Where there is none, or only one go run
// built in a temporary directory, it builds one in a checkout's bin/
// first. Every fix that names the setup prints it (the library's errors,
// sandbox-check, and so mcp-server and the demo).
func SetupCommand(name string) string {
	flag := " --setup-user=" + shell.Word(name)
	var found []string
	if exe, err := os.Executable(); err == nil {
		found = append(found, filepath.Join(filepath.Dir(exe), "sandbox-check"))
	}
	if p, err := exec.LookPath("sandbox-check"); err == nil {
		found = append(found, p)
	}
	for _, p := range found {
		abs, err := filepath.Abs(p)
		if err != nil || strings.Contains(abs, string(filepath.Separator)+"go-build") || unix.Access(abs, unix.X_OK) != nil {
			continue
		}
		if st, err := os.Stat(abs); err == nil && st.Mode().IsRegular() {
			return "sudo " + shell.Word(abs) + flag
		}
	}
	return "go build -o bin/ ./cmd/sandbox-check && sudo bin/sandbox-check" + flag + " (in a checkout of go-runtime-sandbox)"
}

// SetupStep is one thing the one-time setup does.
type SetupStep struct {
	// Protections are the ones the step makes available.
	Protections []string
	// What says what the step does, for a person about to give it root.
	What string
}

// SetupNeeded returns the steps Setup would take on this host for uid
// with opts (its memory limit, with the memory disk's size for a uid
// other than root, sizes the open-file table), none when every
// protection root can add is in place: the open-file table raised when it
// is too small (file-table), and on cgroup v1 the user's cgroup groups
// (cgroup-memory, cgroup-pids, cgroup-cpu), which root makes for a user
// other than root (DelegateCgroups). It needs no privilege.
func SetupNeeded(uid int, opts Options) []SetupStep {
	o := opts.withDefaults()
	if uid != 0 && opts.DiskBytes <= 0 && !opts.Relax.DiskQuota {
		o.DiskBytes = DefaultMemoryDiskBytes // the user's disk is in memory, whoever asks
	}
	var steps []SetupStep
	if fileTableProblem(o.chargedMemory(uid != 0), hostFileMax()) != nil {
		steps = append(steps, SetupStep{Protections: []string{ProtFileTable},
			What: fmt.Sprintf("raise fs.file-max from %d to %s, as systemd does at every boot, so that no sandbox can fill the host's open-file table (kept in %s)",
				hostFileMax(), systemdFileMax, fileMaxConf)})
	}
	if cgroups.DelegationNeeded(uid) {
		steps = append(steps, SetupStep{Protections: []string{ProtCgroupMemory, ProtCgroupPids, ProtCgroupCPU},
			What: fmt.Sprintf("give uid %d a cgroup v1 group of its own in the memory, pids and cpu hierarchies, for its sandboxes' memory, task and CPU limits (until reboot)", uid)})
	}
	return steps
}

// fileMaxConf keeps the raised fs.file-max across reboots on hosts without
// systemd (which sets it itself at every boot).
const fileMaxConf = "/etc/sysctl.d/60-go-runtime-sandbox.conf"

// Setup takes, as root, the steps SetupNeeded names for the user uid
// (primary group gid) and returns them. It is idempotent: a step already
// in place is not taken again. uid 0 gets the host settings only (root
// needs no cgroup of its own).
func Setup(uid, gid int, opts Options) ([]SetupStep, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the one-time setup needs root (run it with sudo)")
	}
	steps := SetupNeeded(uid, opts)
	for i, s := range steps {
		var err error
		switch s.Protections[0] {
		case ProtFileTable:
			err = raiseFileMax()
		default:
			_, err = cgroups.Delegate(uid, gid)
		}
		if err != nil {
			return steps[:i], fmt.Errorf("%s: %w", s.What, err)
		}
	}
	return steps, nil
}

// raiseFileMax sets fs.file-max as systemd does, now and in fileMaxConf.
func raiseFileMax() error {
	if err := os.WriteFile(fileMaxConf, []byte("fs.file-max = "+systemdFileMax+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/fs/file-max", []byte(systemdFileMax), 0o644); err != nil {
		return err
	}
	if got := hostFileMax(); strconv.FormatInt(got, 10) != systemdFileMax {
		return fmt.Errorf("fs.file-max is still %d after writing %s", got, systemdFileMax)
	}
	return nil
}

// RemoveStateDir removes a state directory (Options.StateDir) no backend
// uses any more, with the read-only directories of its seed build caches,
// which os.RemoveAll cannot empty for a user other than root: tests'
// temporary state directories.
func RemoveStateDir(dir string) error { return tree.Remove(dir) }

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
