package gate

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cloexec"
)

// Exit codes of a gate that failed (it never returns otherwise: it
// becomes the plan's command).
const (
	// ExitReleaseLost: the backend closed the release descriptor without
	// writing (it gave up on the start).
	ExitReleaseLost = 97
	// ExitFailed: a step of the plan failed; stderr says which.
	ExitFailed = 98
	// ExitUsage: the arguments are not a plan.
	ExitUsage = 2
)

// Prefix starts every line a gate that failed writes on stderr: output
// without it came from something else (a binary that is not a gate).
const Prefix = "sandbox gate: "

// errReleaseLost is the wait ending without a release.
var errReleaseLost = errors.New("released by nobody: the backend gave up on this start")

// Main runs the gate with args (Plan.Args) and the environment environ.
// It returns only when the gate fails, with its exit code, having said
// why on stderr; otherwise this process has become the plan's command.
func Main(args, environ []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	plan := fs.String("plan", "", "the plan, as JSON (written by the local backend; see package gate)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *plan == "" {
		fmt.Fprintln(stderr, Prefix+"started by the local backend only, with --plan JSON")
		return ExitUsage
	}
	var p Plan
	if err := json.Unmarshal([]byte(*plan), &p); err != nil {
		fmt.Fprintf(stderr, "%sbad plan: %v\n", Prefix, err)
		return ExitUsage
	}
	if err := p.validate(); err != nil {
		fmt.Fprintf(stderr, "%s%v\n", Prefix, err)
		return ExitUsage
	}
	err := run(p, environ)
	fmt.Fprintf(stderr, "%s%v\n", Prefix, err)
	if errors.Is(err, errReleaseLost) {
		return ExitReleaseLost
	}
	return ExitFailed
}

// run carries out p and becomes its command; it returns only an error.
func run(p Plan, environ []string) error {
	if err := cloexec.Except(append(p.Pass, p.WaitFD)...); err != nil {
		return fmt.Errorf("keep inherited descriptors out of the sandbox: %w", err)
	}
	if p.WaitFD > 0 {
		if err := waitRelease(p.WaitFD); err != nil {
			return err
		}
	}
	// The namespaces made below and the cgroups joined here are this
	// thread's, and the exec at the end, on the same thread, keeps them:
	// the goroutine stays on it.
	runtime.LockOSThread()
	for _, f := range p.Join {
		if err := joinCgroup(f); err != nil {
			return fmt.Errorf("join the sandbox's cgroup: %w", err)
		}
	}
	for _, l := range p.Rlimits {
		// Set here, not by the backend with prlimit: the Go runtime puts
		// back at exec the open-file limit it started with unless this
		// process itself set one.
		if err := unix.Prlimit(0, l.Resource, &unix.Rlimit{Cur: l.Value, Max: l.Value}, nil); err != nil {
			return fmt.Errorf("set the sandbox's %s limit to %d: %w", l.Name, l.Value, err)
		}
	}
	if p.Mounts != nil {
		if err := makeMounts(*p.Mounts); err != nil {
			return err
		}
	}
	if p.Disk != nil {
		if err := mountDisk(*p.Disk); err != nil {
			return err
		}
	}
	if p.Net != nil {
		if err := makeNet(*p.Net); err != nil {
			return err
		}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if p.UID > 0 {
		if err := takeIDs(p.UID, p.GID); err != nil {
			return err
		}
	}
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, Env+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(p.Command[0], p.Command, env)
	return fmt.Errorf("run %s: %w", p.Command[0], err)
}

// joinCgroup writes "0" to the v1 tasks file f, which moves the calling
// thread into f's cgroup; f must exist (nothing is created).
func joinCgroup(f string) error {
	t, err := os.OpenFile(f, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = t.WriteString("0")
	return errors.Join(err, t.Close())
}

// waitRelease reads one line from fd and closes it.
func waitRelease(fd int) error {
	f := os.NewFile(uintptr(fd), "release")
	defer f.Close()
	if _, err := bufio.NewReader(f).ReadString('\n'); err != nil {
		return fmt.Errorf("%w (%v)", errReleaseLost, err)
	}
	return nil
}

// takeIDs makes uid and gid the process's real, effective and saved ids,
// with no supplementary groups, and leaves it no capability to pass on.
func takeIDs(uid, gid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("take gid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("take uid %d: %w", uid, err)
	}
	// Leaving uid 0 cleared the permitted, effective and ambient sets;
	// the inheritable set (where unshare --keep-caps put them)
	// is cleared here, so that nothing is left to regain.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}
