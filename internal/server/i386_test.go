package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp/i386call"
	"golang.org/x/sys/unix"
)

// TestBinaryInitRefusesI386: as PID 1 with --init, and with --init
// --init-guard, the server's filter refuses a command's system calls made
// through the i386 interface (int $0x80): the attack program's
// (sandboxattack, the pod battery's too) i386 kill(1, SIGCONT) and forged
// fault, rt_sigqueueinfo(1, SIGSEGV) with si_code SI_QUEUE, fail with
// EPERM and the server lives on. Before, foreign calls got the init
// policies' default action, allow, and the forged fault crashed the
// server (docs/e2e.md); under the guard i386 kill(1, SIGCONT) went
// through too. Skipped where the host's kernel runs no i386 calls (this
// process asks it, unfiltered).
func TestBinaryInitRefusesI386(t *testing.T) {
	if _, err := i386call.Syscall(i386call.Getpid, 0, 0, 0); errors.Is(err, i386call.ErrUnsupported) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("no i386 system calls here: %v", err)
	}
	attack := buildAttack(t)
	for _, args := range [][]string{{"--init"}, {"--init", "--init-guard"}} {
		p, _ := startAsPID1(t, args...)
		for _, cmd := range []string{"i386kill 1 18", "i386sigqueue 1 11"} {
			res := p.execute(t, &http.Client{}, p.url, map[string]any{"command": attack + " " + cmd})
			p.alive(t, fmt.Sprintf("%s under %v", cmd, args))
			if out := res.Stdout + res.Stderr; !strings.HasPrefix(out, "REFUSED operation not permitted") {
				t.Errorf("%s under %v: %q, want REFUSED operation not permitted", cmd, args, out)
			}
		}
	}
}
