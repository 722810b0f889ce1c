package local_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/sandboxattack"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// armAttacker writes keep.txt (serverIntact) and builds the attack
// program at /tmp/attack in s.
func armAttacker(s *goruntime.Session) findings {
	var f findings
	files := []goruntime.File{{Path: "keep.txt", Data: []byte("kept")}}
	for name, data := range sandboxattack.Files() {
		files = append(files, goruntime.File{Path: "attack/" + name, Data: []byte(data)})
	}
	f.mustOK(s, goruntime.Request{Files: files, Command: "cd attack && go build -o /tmp/attack ."})
	return f
}

// pid1Session opens a session armed for the attacks (armAttacker).
func pid1Session(t *testing.T, opts local.Options) *goruntime.Session {
	t.Helper()
	s := openSession(t, newBackend(t, opts))
	require(t, armAttacker(s))
	return s
}

// serverIsPID1: the runtime server is the sandbox's PID 1, alone.
func serverIsPID1(s *goruntime.Session) findings {
	var f findings
	res := f.mustOK(s, goruntime.Request{Command: "tr '\\0' ' ' </proc/1/cmdline; echo; pgrep -x server"})
	if res == nil {
		return f
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "/.sandbox/server ") || strings.TrimSpace(lines[1]) != "1" {
		f.add("PID 1 is %q and the server's pids are %q; want the server, alone, at PID 1", lines[0], lines[1:])
	}
	return f
}

// TestServerIsPID1: the runtime server is the sandbox's init, so the
// kernel shields it from its commands.
func TestServerIsPID1(t *testing.T) {
	check(t, serverIsPID1(openSession(t, newBackend(t, testOptions()))))
}

// killServerAttacks: whatever signal a command sends the runtime server
// (PID 1), to every process (-1) or to its uid, the server goes on
// answering and the session's files stay. s is armed (armAttacker).
func killServerAttacks(s *goruntime.Session) findings {
	var f findings
	for _, cmd := range []string{
		"kill -9 -1",
		"kill -TERM -1",
		"pkill -u sandbox",
		"pkill -9 -u sandbox",
		"kill -9 1",
		"kill -STOP 1; kill -STOP -1",
		"kill -QUIT 1",
		"kill -9 $(pgrep -x server)",
	} {
		if f.attack(s, cmd) == nil {
			return f
		}
	}
	for sig := 1; sig <= 64; sig++ {
		for _, cmd := range []string{"kill -%d 1", "kill -%d $(pgrep -x server)", "kill -%d -1"} {
			if f.attack(s, fmt.Sprintf(cmd, sig)) == nil {
				return f
			}
		}
	}
	if res := f.mustOK(s, goruntime.Request{Command: "cat keep.txt"}); res != nil && res.Stdout != "kept" {
		f.add("after the signals: cat keep.txt: %q", res.Stdout)
	}
	return f
}

// TestCommandCannotKillServer: killServerAttacks.
func TestCommandCannotKillServer(t *testing.T) {
	check(t, killServerAttacks(pid1Session(t, testOptions())))
}

// TestCommandCannotForgeFaultSignal: forgeFaultAttacks, with the
// sandbox's seccomp policy and with it relaxed (the server's own filter
// then holds alone).
func TestCommandCannotForgeFaultSignal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		relax local.Relax
	}{{"seccomp", local.Relax{}}, {"seccomp relaxed", local.Relax{Seccomp: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.Relax.Seccomp = tc.relax.Seccomp // the rest as testOptions has it
			check(t, forgeFaultAttacks(pid1Session(t, opts)))
		})
	}
}

// forgeFaultAttacks: a signal sent with a siginfo of the command's making
// (si_code SI_QUEUE), or asked for on a pipe's I/O readiness (F_SETSIG),
// looks like a real fault to the Go runtime; the
// sandbox's seccomp policy and the server's own filter (which holds with
// the former relaxed) refuse it for fault signals, and every other one
// the server drops. s is armed (armAttacker).
func forgeFaultAttacks(s *goruntime.Session) findings {
	var f findings
	fault := map[int]bool{4: true, 5: true, 7: true, 8: true, 11: true, 16: true, 31: true}
	for sig := 1; sig <= 64; sig++ {
		for _, mode := range []string{"sigqueue", "pidfd"} {
			res := f.attack(s, fmt.Sprintf("/tmp/attack %s $(pgrep -x server) %d", mode, sig))
			if res == nil {
				return f
			}
			want := "DONE " // the kernel takes it; the server drops it
			if fault[sig] {
				want = "REFUSED operation not permitted"
			}
			if !strings.HasPrefix(res.Stdout, want) {
				f.add("%s of signal %d: %q (stderr %q), want %q", mode, sig, res.Stdout, res.Stderr, want)
			}
		}
	}
	// A fault signal asked for on I/O readiness (F_SETSIG) arrives with
	// si_code SI_SIGIO, a real fault to the Go runtime: refused.
	for sig := range fault {
		res := f.attack(s, fmt.Sprintf("/tmp/attack setsig $(pgrep -x server) %d; sleep 0.2", sig))
		if res == nil {
			return f
		}
		if !strings.HasPrefix(res.Stdout, "REFUSED operation not permitted") {
			f.add("setsig of signal %d: %q (stderr %q), want REFUSED", sig, res.Stdout, res.Stderr)
		}
	}
	return f
}

// TestCommandCannotReachServerMemory: serverMemoryAttacks, with the
// seccomp filter (which refuses ptrace itself) and without it.
func TestCommandCannotReachServerMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		relax local.Relax
	}{{"seccomp", local.Relax{}}, {"seccomp relaxed", local.Relax{Seccomp: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.Relax.Seccomp = tc.relax.Seccomp // the rest as testOptions has it
			check(t, serverMemoryAttacks(pid1Session(t, opts)))
		})
	}
}

// serverMemoryAttacks: a command cannot read the server's environment,
// list its descriptors, write its memory or ptrace it (PR_SET_DUMPABLE
// 0), while its own process, dumpable again after execve, reads its own
// environment and /proc entries. s is armed (armAttacker).
func serverMemoryAttacks(s *goruntime.Session) findings {
	var f findings
	for _, mode := range []string{"environ", "fd", "mem", "ptrace"} {
		res := f.attack(s, "/tmp/attack "+mode+" $(pgrep -x server)")
		if res == nil {
			return f
		}
		if !strings.HasPrefix(res.Stdout, "REFUSED ") {
			f.add("%s of the server: %q (stderr %q), want REFUSED", mode, res.Stdout, res.Stderr)
		}
	}
	res := f.mustOK(s, goruntime.Request{Command: "grep -c . /proc/self/environ >/dev/null && ls /proc/self/fd >/dev/null && /tmp/attack environ $$"})
	if res != nil && !strings.HasPrefix(res.Stdout, "DONE ") {
		f.add("a command reading its shell's environ: %q, want DONE", res.Stdout)
	}
	return f
}
