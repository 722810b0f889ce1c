package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/sandboxattack"
)

// buildAttack builds the attack program (sandboxattack.Files) on the host
// and returns its path.
func buildAttack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range sandboxattack.Files() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "attack")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the attack program: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryInitGuard: as PID 1 with --init --init-guard (a pod's
// runtime container), a command cannot signal the server at all: kill,
// sigqueue and F_SETSIG aimed at PID 1 fail with EPERM for every signal,
// joining its process group fails, and the server answers after each.
// kill -9 -1 still reaches the command's own processes, the existence
// check (signal 0) still works, kill aimed at other pids is not refused
// (200 and 424 were, docs/e2e.md), and a Go program still kills its child
// (pidfd_send_signal refused with ENOSYS: the runtime falls back to kill).
// Here the kernel would drop most of these anyway; gVisor would not (the
// end-to-end pod battery runs them there, test/e2e).
func TestBinaryInitGuard(t *testing.T) {
	attack := buildAttack(t)
	p, _ := startAsPID1(t, "--init", "--init-guard")
	run := func(cmd string) string {
		t.Helper()
		res := p.execute(t, &http.Client{}, p.url, map[string]any{"command": cmd})
		p.alive(t, cmd)
		return res.Stdout + res.Stderr
	}
	for sig := 1; sig <= 64; sig++ {
		if out := run(fmt.Sprintf("kill -%d 1", sig)); !strings.Contains(out, "not permitted") {
			t.Errorf("kill -%d 1: %q, want refused (Operation not permitted)", sig, out)
		}
	}
	for _, sig := range []int{9, 11, 15, 19, 34} {
		for _, mode := range []string{"sigqueue", "setsig"} {
			if out := run(fmt.Sprintf("%s %s 1 %d; sleep 0.2", attack, mode, sig)); !strings.HasPrefix(out, "REFUSED operation not permitted") {
				t.Errorf("%s of signal %d at PID 1: %q, want REFUSED", mode, sig, out)
			}
		}
	}
	if out := run(attack + " joinpgid 1"); !strings.HasPrefix(out, "REFUSED operation not permitted") {
		t.Errorf("joining PID 1's process group: %q, want REFUSED", out)
	}
	// Pids equal to the calls the guard names are not PID 1: with
	// go-seccomp-bpf's assembler the filter refused kill(200, …) (tkill
	// is call 200) and kill(424, …) (pidfd_send_signal), so a command at
	// pid 200 could not kill itself (docs/e2e.md, "signal_kill in a runc
	// pod"). Here those pids are free, or the command's own shell.
	for _, cmd := range []string{"kill -9 200", "kill -15 424", "kill -1 109", "kill -11 129"} {
		if out := run(cmd); strings.Contains(out, "not permitted") || strings.Contains(out, "not implemented") {
			t.Errorf("%s: %q, want the kernel's answer (no such process), not the filter's", cmd, out)
		}
	}
	if out := run("kill -0 1 && echo exists"); out != "exists\n" {
		t.Errorf("kill -0 1: %q, want the existence check to pass", out)
	}
	if out := run("sleep 30 & kill -9 -1; wait $!; echo $?"); !strings.HasPrefix(out, "137\n") {
		t.Errorf("kill -9 -1 from a command: %q, want its own sleep killed (137)", out)
	}
	if out := run(attack + " killchild"); out != "DONE child ended: signal: killed\n" {
		t.Errorf("a Go program killing its child: %q, want it killed", out)
	}
	if out := run(attack + " pidfd 1 0"); !strings.Contains(out, "function not implemented") {
		t.Errorf("pidfd_send_signal: %q, want ENOSYS", out)
	}
}

// TestBinaryInitGuardRefusals: --init-guard without --init, or not as
// PID 1 (a pod sharing its process namespace), refuses to start, naming
// why.
func TestBinaryInitGuardRefusals(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--init-guard"}, "init-guard (from --init-guard): only with --init"},
		{[]string{"--init", "--init-guard"}, "not the init (PID 1)"},
	} {
		cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--base-dir", t.TempDir()}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: err %v, output %s; want a refusal containing %q", tc.args, err, out, tc.want)
		}
	}
}
