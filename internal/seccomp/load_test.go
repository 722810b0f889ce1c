package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// loadTestRole is how the tests below run this test binary again in the
// role the kernel needs: "init" (PID 1 of a new pid namespace, under
// GuardedInitPolicy), "selfkill" (a process that kills itself) or
// "policy" (a process under the sandbox's Policy).
const loadTestRole = "SECCOMP_LOAD_TEST_ROLE"

// rerun runs this test binary's test named test in role, in a new pid
// namespace when newPID (and a user namespace mapping this uid to root
// when not root, for PID 1 to write ns_last_pid), and returns its output.
func rerun(t *testing.T, test, role string, newPID bool) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), loadTestRole+"="+role)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if newPID {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
		if os.Geteuid() != 0 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as %s: %v\n%s", test, role, err, out)
	}
	return string(out)
}

// TestGuardedInitLetsCommandsSignal: under GuardedInitPolicy, loaded by
// PID 1 with Load as the runtime server does (--init-guard), a process
// whose pid is 200 or 424 kills itself with SIGKILL, and kill and tgkill
// aimed at pids that equal the calls the policy names (109, 129, 297) get
// the kernel's answer (no such process), not the filter's. With
// go-seccomp-bpf's assembler, kill(200, SIGKILL) failed with EPERM (tkill
// is call 200) and kill(424, …) with ENOSYS (pidfd_send_signal): the
// corpus case signal_kill, in a pod, went on past its kill and exited 2
// (docs/e2e.md). Real kernel, real filter: the namespace lets the test
// choose the pid (ns_last_pid) and guarantees that the other pids are
// free.
func TestGuardedInitLetsCommandsSignal(t *testing.T) {
	switch os.Getenv(loadTestRole) {
	case "selfkill":
		err := unix.Kill(os.Getpid(), unix.SIGKILL)
		fmt.Printf("kill(getpid()=%d, SIGKILL) returned: %v\n", os.Getpid(), err)
		os.Exit(3)
	case "init":
		guardedInit()
		return
	}
	out := rerun(t, "TestGuardedInitLetsCommandsSignal", "init", true)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "WRONG ") {
			t.Error(strings.TrimPrefix(line, "WRONG "))
		}
	}
	if !strings.Contains(out, "checked") {
		t.Fatalf("the namespace's init did not finish:\n%s", out)
	}
}

// guardedInit is the "init" role: PID 1 of its pid namespace, under
// GuardedInitPolicy. It prints a WRONG line for each wrong answer.
func guardedInit() {
	wrong := func(format string, args ...any) { fmt.Printf("WRONG "+format+"\n", args...) }
	if os.Getpid() != 1 {
		wrong("pid %d, want 1 in a new pid namespace", os.Getpid())
		return
	}
	p, err := GuardedInitPolicy()
	if err == nil {
		err = Load(p)
	}
	if err != nil {
		wrong("load GuardedInitPolicy: %v", err)
		return
	}
	for _, target := range []int{200, 424, 57} {
		// The next process of this namespace gets pid target. A thread
		// this process starts meanwhile takes it: try again.
		var pid int
		var state *os.ProcessState
		var out []byte
		for try := 0; try < 20 && pid != target; try++ {
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(target-1)), 0); err != nil {
				wrong("set the next pid to %d: %v", target, err)
				return
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestGuardedInitLetsCommandsSignal$")
			cmd.Env = append(os.Environ(), loadTestRole+"=selfkill")
			out, err = cmd.CombinedOutput()
			if cmd.Process == nil {
				wrong("start a process: %v", err)
				return
			}
			pid, state = cmd.Process.Pid, cmd.ProcessState
		}
		if pid != target {
			wrong("could not start a process at pid %d (the last one got %d)", target, pid)
			continue
		}
		if ws, ok := state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			wrong("the process at pid %d did not die of its own SIGKILL: %v, %q", pid, state, out)
		}
	}
	// Pids 109, 129 and 297 are free (this namespace's threads took pids
	// below 30, its children 200, 424 and 57, and have ended).
	for _, c := range []struct {
		call string
		err  error
	}{
		{"kill(109, SIGHUP)", unix.Kill(109, unix.SIGHUP)},
		{"kill(129, SIGSEGV)", unix.Kill(129, unix.SIGSEGV)},
		{"kill(200, SIGTERM)", unix.Kill(200, unix.SIGTERM)},
		{"kill(424, SIGTERM)", unix.Kill(424, unix.SIGTERM)},
		{"tgkill(297, 297, SIGSEGV)", unix.Tgkill(297, 297, unix.SIGSEGV)},
		{"tgkill(200, 200, SIGKILL)", unix.Tgkill(200, 200, unix.SIGKILL)},
	} {
		if !errors.Is(c.err, unix.ESRCH) {
			wrong("%s: %v, want ESRCH (no such process)", c.call, c.err)
		}
	}
	// What the policy is for still holds.
	if err := unix.Kill(1, unix.SIGKILL); !errors.Is(err, unix.EPERM) {
		wrong("kill(1, SIGKILL): %v, want EPERM", err)
	}
	fmt.Println("checked")
}

// addrNoRandomize is personality(2)'s ADDR_NO_RANDOMIZE (not in x/sys/unix).
const addrNoRandomize = 0x0040000

// TestPolicyRefusesHighWords: under the sandbox's Policy, loaded with
// Load, socket and personality with a refused value in an argument's low
// word are refused whatever its high word. With go-seccomp-bpf's
// assembler, a high word of 56 (clone's call number) sent the check into
// clone's rule, which allowed them: socket((56<<32)|AF_VSOCK, …) returned
// a socket (the kernel reads the int in the low word), and
// personality((56<<32)|ADDR_NO_RANDOMIZE) turned off address space
// randomization.
func TestPolicyRefusesHighWords(t *testing.T) {
	if os.Getenv(loadTestRole) != "policy" {
		out := rerun(t, "TestPolicyRefusesHighWords", "policy", false)
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "WRONG ") {
				t.Error(strings.TrimPrefix(line, "WRONG "))
			}
		}
		if !strings.Contains(out, "checked") {
			t.Fatalf("the child under Policy did not finish:\n%s", out)
		}
		return
	}
	p, err := Policy()
	if err == nil {
		err = Load(p)
	}
	if err != nil {
		fmt.Printf("WRONG load Policy: %v\n", err)
		return
	}
	for _, c := range []struct {
		name     string
		nr       uintptr
		a0, a1   uintptr
		refused  bool
		isSocket bool
	}{
		{"socket(AF_UNIX)", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, false, true},
		{"socket(AF_VSOCK)", unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, true, true},
		{"socket((56<<32)|AF_VSOCK)", unix.SYS_SOCKET, 56<<32 | unix.AF_VSOCK, unix.SOCK_STREAM, true, true},
		{"socket((56<<32)|AF_ALG)", unix.SYS_SOCKET, 56<<32 | unix.AF_ALG, unix.SOCK_SEQPACKET, true, true},
		{"personality(query)", unix.SYS_PERSONALITY, 0xffffffff, 0, false, false},
		{"personality((56<<32)|ADDR_NO_RANDOMIZE)", unix.SYS_PERSONALITY, 56<<32 | addrNoRandomize, 0, true, false},
	} {
		r, _, errno := unix.RawSyscall(c.nr, c.a0, c.a1, 0)
		if c.isSocket && errno == 0 {
			unix.Close(int(r))
		}
		if refused := errno == unix.EPERM; refused != c.refused {
			fmt.Printf("WRONG %s: %d, errno %v; want refused (EPERM) %v\n", c.name, int(r), errno, c.refused)
		}
	}
	fmt.Println("checked")
}
