package local_test

import (
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The kernel surface a command reaches: the seccomp filter's refusals and
// the block on nested user namespaces.

// syscallProbe calls system calls the seccomp filter refuses, with
// harmless arguments, and prints "name errno" for each. Several succeed
// (errno 0) or fail differently without the filter; the control sandbox
// in TestSeccompRefusesKernelSurface shows which.
const syscallProbe = `package main

import (
	"fmt"
	"syscall"
	"unsafe"
)

func call(name string, nr uintptr, args ...uintptr) {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := syscall.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e == 0 && (name == "socket-alg" || name == "socket-vsock" || name == "userfaultfd" || name == "io_uring_setup" || name == "mq_open") {
		syscall.Close(int(r))
	}
	fmt.Println(name, int(e))
}

func main() {
	var buf [256]byte
	p := uintptr(unsafe.Pointer(&buf[0]))
	str := func(s string) uintptr { b := append([]byte(s), 0); return uintptr(unsafe.Pointer(&b[0])) }
	local := [2]uintptr{p, 8}
	remote := [2]uintptr{p + 64, 8}
	call("socket-alg", syscall.SYS_SOCKET, 38, syscall.SOCK_SEQPACKET, 0)
	call("socket-vsock", syscall.SYS_SOCKET, 40, syscall.SOCK_STREAM, 0)
	call("io_setup", syscall.SYS_IO_SETUP, 1, p)
	call("io_uring_setup", 425, 1, p)
	call("keyctl", syscall.SYS_KEYCTL, 0, ^uintptr(2), 0)
	call("add_key", syscall.SYS_ADD_KEY, str("user"), str("k"), str("v"), 1, ^uintptr(1))
	call("process_vm_readv", 310, uintptr(syscall.Getpid()), uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
	call("personality", syscall.SYS_PERSONALITY, 0x0040000)
	call("modify_ldt", syscall.SYS_MODIFY_LDT, 0, p, 16)
	call("userfaultfd", 323, 1)
	call("mq_open", syscall.SYS_MQ_OPEN, str("probe"), syscall.O_CREAT|syscall.O_RDWR, 0o600, 0)
	call("setns", 308, ^uintptr(0), 0)
	call("unshare-user", syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER)
	call("unshare-mount", syscall.SYS_UNSHARE, syscall.CLONE_NEWNS)
	call("mount", syscall.SYS_MOUNT, str("none"), str("/tmp"), str("tmpfs"), 0, 0)
	call("chroot", syscall.SYS_CHROOT, str("/"))
	call("bpf", 321, 0, p, 64)
	call("perf_event_open", syscall.SYS_PERF_EVENT_OPEN, p, 0, ^uintptr(0), ^uintptr(0), 0)
	call("ptrace", syscall.SYS_PTRACE, syscall.PTRACE_PEEKDATA, 1, 0, 0)
	call("init_module", syscall.SYS_INIT_MODULE, 0, 0, str(""))
	call("kexec_load", syscall.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	call("open_by_handle_at", 304, ^uintptr(99), p, 0)
	call("fsopen", 430, str("tmpfs"), 0)
	call("acct", syscall.SYS_ACCT, 0)
	call("swapon", syscall.SYS_SWAPON, str("/tmp/x"), 0)
	call("clone3", 435, 0, 0)
}
`

// probe runs syscallProbe in s and returns name -> errno; what kept it
// from reporting is a finding.
func probe(s *goruntime.Session) (map[string]syscall.Errno, findings) {
	var f findings
	res := f.mustOK(s, goruntime.Request{Files: []goruntime.File{{Path: "probe/main.go", Data: []byte(syscallProbe)}}, Command: "cd probe && go run main.go"})
	if res == nil {
		return nil, f
	}
	out := map[string]syscall.Errno{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		name, n, ok := strings.Cut(line, " ")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			f.add("probe output line %q", line)
			return nil, f
		}
		out[name] = syscall.Errno(v)
	}
	return out, f
}

// seccompAttacks: calls from every family Docker's default profile
// refuses (namespaces, mounts, kernel modules, keyrings, BPF, perf,
// ptrace and cross-process memory, async I/O, unusual socket families,
// personality) fail with EPERM, clone3 with ENOSYS, the runtime server
// survives, and the next command works. amd64 only (the probe's system
// call numbers).
func seccompAttacks(s *goruntime.Session) findings {
	got, f := probe(s)
	if got == nil {
		return f
	}
	if len(got) < 25 {
		f.add("probe reported %d calls: %v", len(got), got)
		return f
	}
	names := slices.Sorted(maps.Keys(got))
	for _, name := range names {
		errno := got[name]
		want := syscall.EPERM
		if name == "clone3" {
			want = syscall.ENOSYS
		}
		if errno != want {
			f.add("%s: errno %d (%v), want %v", name, int(errno), errno, want)
		}
	}
	if res := f.mustOK(s, goruntime.Request{Command: "echo still here"}); res != nil && strings.TrimSpace(res.Stdout) != "still here" {
		f.add("next command: %q", res.Stdout)
	}
	return f
}

// TestSeccompRefusesKernelSurface: seccompAttacks. A control sandbox
// without the filter shows the calls that the filter alone stops.
func TestSeccompRefusesKernelSurface(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses amd64 system call numbers")
	}
	check(t, seccompAttacks(openSession(t, newBackend(t, testOptions()))))

	opts := testOptions()
	opts.Relax.Seccomp = true
	control, f := probe(openSession(t, newBackend(t, opts)))
	require(t, f)
	stoppedByFilter := 0
	for _, name := range []string{"socket-alg", "io_setup", "keyctl", "add_key", "process_vm_readv", "personality", "modify_ldt", "mq_open", "setns", "unshare-user", "clone3"} {
		if control[name] != syscall.EPERM {
			stoppedByFilter++
		} else {
			t.Logf("%s fails with EPERM even without the filter here", name)
		}
	}
	if stoppedByFilter < 8 {
		t.Errorf("only %d calls behave differently without the filter (%v): the probe does not exercise it", stoppedByFilter, control)
	}
}

const nestedUserns = `package main

import (
	"fmt"
	"os/exec"
	"syscall"
)

func main() {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	fmt.Printf("clone: %v\n", cmd.Run())
}
`

// nestedUsernsAttacks: a command's clone with CLONE_NEWUSER (from Go's
// os/exec) fails with want ("<nil>": succeeds), and the unshare command
// fails unless want is "<nil>"; the next command works.
func nestedUsernsAttacks(s *goruntime.Session, want string) findings {
	var f findings
	res := f.mustOK(s, goruntime.Request{Files: []goruntime.File{{Path: "userns/main.go", Data: []byte(nestedUserns)}}, Command: "cd userns && go run main.go"})
	if res == nil {
		return f
	}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if !strings.HasSuffix(line, want) {
			f.add("%s, want %q", line, want)
		}
	}
	if res = f.run(s, goruntime.Request{Command: "unshare --user --map-root-user true"}); res != nil && (res.ExitCode == 0) != (want == "<nil>") {
		f.add("unshare command: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	f.mustOK(s, goruntime.Request{Command: "echo next"})
	return f
}

// TestNestedUserNamespaceRefused: a sandbox cannot make a user namespace
// of its own (nestedUsernsAttacks; unshare from the syscall probe in
// TestSeccompRefusesKernelSurface), by two layers: the seccomp filter
// (EPERM) and bubblewrap's --disable-userns (ENOSPC, seen with the filter
// relaxed). With both relaxed the same program succeeds, so the test can
// tell.
func TestNestedUserNamespaceRefused(t *testing.T) {
	cases := []struct {
		name  string
		relax local.Relax
		want  string
	}{
		{"both layers", local.Relax{}, "operation not permitted"},
		{"disable-userns only", local.Relax{Seccomp: true}, "no space left on device"},
		{"neither", local.Relax{Seccomp: true, NestedUserns: true}, "<nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := testOptions()
			opts.Relax.Seccomp, opts.Relax.NestedUserns = c.relax.Seccomp, c.relax.NestedUserns // the rest as testOptions has it
			check(t, nestedUsernsAttacks(openSession(t, newBackend(t, opts)), c.want))
		})
	}
}
