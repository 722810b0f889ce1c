package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp/i386call"
	"golang.org/x/sys/unix"
)

// i386Role makes this test binary, run as a command of the server, the
// attacker of TestBinaryInitRefusesI386.
const i386Role = "SERVER_TEST_I386_ATTACK"

// TestBinaryInitRefusesI386: as PID 1 with --init, and with --init
// --init-guard, the server's filter refuses a command's system calls made
// through the i386 interface (int $0x80), so a forged fault sent that way,
// rt_sigqueueinfo(1, SIGSEGV) with si_code SI_QUEUE, fails with EPERM and
// the server lives on. Before, foreign calls got the init policies'
// default action, allow, and the same call crashed the server
// (docs/e2e.md); under the guard i386 kill(1, SIGCONT) went through too.
// Skipped where the kernel has no i386 interface.
func TestBinaryInitRefusesI386(t *testing.T) {
	if os.Getenv(i386Role) != "" {
		i386Attack()
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("%s=1 %s -test.run='^TestBinaryInitRefusesI386$'", i386Role, self)
	for _, args := range [][]string{{"--init"}, {"--init", "--init-guard"}} {
		p, _ := startAsPID1(t, args...)
		res := p.execute(t, &http.Client{}, p.url, map[string]any{"command": cmd})
		out := res.Stdout + res.Stderr
		if skip, ok := strings.CutPrefix(out, "SKIP "); ok {
			t.Skip(strings.TrimSpace(skip))
		}
		p.alive(t, fmt.Sprintf("i386 calls under %v", args))
		for _, want := range []string{"getpid: REFUSED operation not permitted", "sigqueue: REFUSED operation not permitted", "kill: REFUSED operation not permitted"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: %q, want %q", args, out, want)
			}
		}
	}
}

// i386Attack is the command: it makes its i386 calls at PID 1 and prints
// "CALL: DONE" or "CALL: REFUSED err" for each.
func i386Attack() {
	if _, err := i386call.Syscall(i386call.Getpid, 0, 0, 0); errors.Is(err, i386call.ErrUnsupported) || errors.Is(err, unix.ENOSYS) {
		// A filter's EPERM is an answer: only these mean no i386 calls.
		fmt.Printf("SKIP no i386 system calls here: %v\n", err)
		return
	}
	report := func(call string, err error) {
		if err != nil {
			fmt.Printf("%s: REFUSED %v\n", call, err)
		} else {
			fmt.Printf("%s: DONE\n", call)
		}
	}
	_, err := i386call.Syscall(i386call.Getpid, 0, 0, 0)
	report("getpid", err)
	_, err = i386call.Syscall(i386call.Kill, 1, uint32(syscall.SIGCONT), 0)
	report("kill", err)
	// struct compat_siginfo: signo, errno, code, then _rt's pid and uid.
	info, addr, err := i386call.Low32(128)
	if err != nil {
		report("sigqueue", fmt.Errorf("map a siginfo below 4 GiB: %w", err))
		return
	}
	for i, v := range []uint32{uint32(syscall.SIGSEGV), 0, ^uint32(0) /* SI_QUEUE, -1 */, uint32(os.Getpid()), uint32(os.Getuid())} {
		binary.NativeEndian.PutUint32(info[4*i:], v)
	}
	_, err = i386call.Syscall(i386call.RtSigqueueinfo, 1, uint32(syscall.SIGSEGV), addr)
	report("sigqueue", err)
}
