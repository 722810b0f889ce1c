package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp/i386call"
	"golang.org/x/sys/unix"
)

// TestInitPoliciesRefuseI386: under ForgedFaultPolicy and
// GuardedInitPolicy, loaded with Load, a system call made through the
// i386 interface (int $0x80) fails with EPERM, while the same native
// calls get the answers they always got. Before, a foreign call got the
// policy's default action, which for these deny lists is to allow: under
// the guard, i386 kill(1, SIGCONT) succeeded, and i386
// rt_sigqueueinfo(1, SIGSEGV) with si_code SI_QUEUE crashed PID 1, a Go
// program, as a forged fault (docs/e2e.md). Here the child sends it to
// itself (PID 1 of a new pid namespace under the guard): without the fix
// it dies of it. Real kernel, real filter; skipped where the kernel has
// no i386 interface.
func TestInitPoliciesRefuseI386(t *testing.T) {
	switch os.Getenv(loadTestRole) {
	case "i386-forged":
		i386Child(ForgedFaultPolicy, false)
		return
	case "i386-guard":
		i386Child(GuardedInitPolicy, true)
		return
	}
	for _, tc := range []struct {
		role   string
		newPID bool
	}{{"i386-forged", false}, {"i386-guard", true}} {
		out := rerun(t, "TestInitPoliciesRefuseI386", tc.role, tc.newPID)
		if skip, ok := strings.CutPrefix(out, "SKIP "); ok {
			t.Skip(strings.TrimSpace(skip))
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "WRONG ") {
				t.Errorf("%s: %s", tc.role, strings.TrimPrefix(line, "WRONG "))
			}
		}
		if !strings.Contains(out, "checked") {
			t.Fatalf("%s: the child did not finish:\n%s", tc.role, out)
		}
	}
}

// i386Child is the "i386-forged" and "i386-guard" roles: it loads the
// policy policy makes and prints a WRONG line for each wrong answer, then
// "checked" (or "SKIP ..." first when the kernel runs no i386 calls).
func i386Child(policy func() (bpfseccomp.Policy, error), guard bool) {
	wrong := func(format string, args ...any) { fmt.Printf("WRONG "+format+"\n", args...) }
	self := os.Getpid()
	if guard && self != 1 {
		wrong("pid %d, want 1 in a new pid namespace", self)
		return
	}
	switch pid, err := i386call.Syscall(i386call.Getpid, 0, 0, 0); {
	case errors.Is(err, i386call.ErrUnsupported), errors.Is(err, unix.ENOSYS):
		fmt.Printf("SKIP no i386 system calls here: %v\n", err)
		return
	case err != nil || int(pid) != self:
		wrong("i386 getpid before the filter: %d, %v; want %d", pid, err, self)
		return
	}
	// A forged fault, in memory an i386 call can reach: struct
	// compat_siginfo's signo, errno, code, then _rt's pid and uid.
	info, infoAddr, err := i386call.Low32(128)
	if err != nil {
		wrong("map a siginfo below 4 GiB: %v", err)
		return
	}
	defer unix.Munmap(info)
	siSIQueue := int32(-1)
	for i, v := range []uint32{uint32(unix.SIGSEGV), 0, uint32(siSIQueue), uint32(self), uint32(os.Getuid())} {
		binary.NativeEndian.PutUint32(info[4*i:], v)
	}

	p, err := policy()
	if err == nil {
		err = Load(p)
	}
	if err != nil {
		wrong("load the policy: %v", err)
		return
	}
	// Native calls answer as before.
	if pid, _, errno := unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0); errno != 0 || int(pid) != self {
		wrong("getpid: %d, %v; want %d", pid, errno, self)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(self), uintptr(unix.SIGSEGV), uintptr(infoAddr)); errno != unix.EPERM {
		wrong("rt_sigqueueinfo(self, SIGSEGV, SI_QUEUE): %v, want EPERM", errno)
	}
	if guard {
		if err := unix.Kill(1, unix.SIGCONT); !errors.Is(err, unix.EPERM) {
			wrong("kill(1, SIGCONT): %v, want EPERM", err)
		}
	}
	// i386 calls are refused, whatever they are.
	for _, c := range []struct {
		name       string
		nr, a1, a2 uint32
		a3         uint32
		guardOnly  bool
	}{
		{"getpid", i386call.Getpid, 0, 0, 0, false},
		{"kill(1, SIGCONT)", i386call.Kill, 1, uint32(unix.SIGCONT), 0, true},
		{"rt_sigqueueinfo(self, SIGSEGV, SI_QUEUE)", i386call.RtSigqueueinfo, uint32(self), uint32(unix.SIGSEGV), infoAddr, false},
	} {
		if c.guardOnly && !guard {
			continue
		}
		if r, err := i386call.Syscall(c.nr, c.a1, c.a2, c.a3); !errors.Is(err, unix.EPERM) {
			wrong("i386 %s: %d, %v; want EPERM", c.name, r, err)
		}
	}
	fmt.Println("checked")
}
