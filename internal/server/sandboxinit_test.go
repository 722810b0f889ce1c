package server

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAsPID1 runs the server binary as PID 1 of a new pid namespace
// (unshare), as a local sandbox does, with args, and returns it with the
// server's host pid.
func startAsPID1(t *testing.T, args ...string) (*proc, int) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare (util-linux) not found; install util-linux")
	}
	wrap := []string{unshare, "--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		// A user makes the pid and mount namespaces from a user namespace
		// of its own, as bubblewrap does for a local sandbox; the server
		// keeps the user's uid.
		wrap = append(wrap[:1], append([]string{"--user", "--map-current-user"}, wrap[1:]...)...)
	}
	p := startWrapped(t, wrap, os.Environ(), args...)
	if !strings.Contains(p.logs(), `"pid":1,`) {
		t.Fatalf("server is not PID 1 in its namespace:\n%s", p.logs())
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.cmd.Process.Pid, p.cmd.Process.Pid))
	var server int
	if _, err := fmt.Sscan(string(kids), &server); err != nil {
		t.Fatalf("find the server under unshare: %q", kids)
	}
	// Killing unshare leaves its child running; with --init only SIGKILL
	// from outside the namespace ends the server.
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL) })
	return p, server
}

// alive fails t unless p still answers a command.
func (p *proc) alive(t *testing.T, after string) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("after %s the server exited (%v)\n%s", after, p.status, p.logs())
	default:
	}
	c := &http.Client{Timeout: 10 * time.Second}
	if res := p.execute(t, c, p.url, map[string]any{"command": "echo up"}); res.Stdout != "up\n" {
		t.Fatalf("after %s: %+v", after, res)
	}
}

// TestBinaryInitHoldsSignals: as PID 1 with --init, no signal a command
// sends the server (each of 1..64, at PID 1 and at -1) ends or stops it;
// without --init, SIGTERM from a command shuts it down.
func TestBinaryInitHoldsSignals(t *testing.T) {
	p, _ := startAsPID1(t, "--init")
	for sig := 1; sig <= 64; sig++ {
		for _, target := range []string{"1", "-1"} {
			cmd := fmt.Sprintf("kill -%d %s", sig, target)
			p.execute(t, &http.Client{Timeout: 30 * time.Second}, p.url, map[string]any{"command": cmd})
			p.alive(t, cmd)
		}
	}

	plain, _ := startAsPID1(t)
	plain.execute(t, http.DefaultClient, plain.url, map[string]any{"command": "kill -TERM 1"})
	select {
	case <-plain.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("without --init, PID 1 server still runs 30 s after a command sent it SIGTERM")
	}
}

// TestBinaryInitCommandsKeepDefaultSignals: the handlers --init holds are
// not passed on: commands start with the same ignored and blocked signals
// as without --init, and die of SIGTERM as usual.
func TestBinaryInitCommandsKeepDefaultSignals(t *testing.T) {
	const cmd = "grep -E '^Sig(Ign|Blk)' /proc/self/status"
	plain := startBinary(t, os.Environ())
	initp := startBinary(t, os.Environ(), "--init")
	a := plain.execute(t, http.DefaultClient, plain.url, map[string]any{"command": cmd})
	b := initp.execute(t, http.DefaultClient, initp.url, map[string]any{"command": cmd})
	if a.ExitCode != 0 || a.Stdout != b.Stdout {
		t.Errorf("signal masks of a command: %q without --init, %q with it", a.Stdout, b.Stdout)
	}
	if res := initp.execute(t, http.DefaultClient, initp.url, map[string]any{"command": "kill -TERM $$; echo survived"}); res.Signal != int(syscall.SIGTERM) {
		t.Errorf("a command that sends itself SIGTERM under --init: %+v, want killed by SIGTERM", res)
	}
}

// TestBinaryLifeline: the server exits when its lifeline reaches EOF and
// keeps running after the line "detach"; the descriptor is not passed to
// commands.
func TestBinaryLifeline(t *testing.T) {
	start := func(t *testing.T) (*proc, *os.File) {
		fifo := filepath.Join(t.TempDir(), "lifeline")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		opened := make(chan *os.File, 1)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the server's shell opens it
			if err != nil {
				t.Error(err)
			}
			opened <- w
		}()
		p := startWrapped(t, []string{"/bin/sh", "-c", `exec "$@" 3<"$0"`, fifo}, os.Environ(), "--lifeline-fd", "3")
		w := <-opened
		t.Cleanup(func() { _ = w.Close() })
		return p, w
	}

	t.Run("EOF", func(t *testing.T) {
		p, w := start(t)
		res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": "for f in /proc/$$/fd/*; do readlink $f; done"})
		if strings.Contains(res.Stdout, "lifeline") {
			t.Errorf("a command holds the lifeline: its fds are %q", res.Stdout)
		}
		_ = w.Close()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("server still runs 10 s after its lifeline closed")
		}
		if !strings.Contains(p.logs(), "lifeline closed") {
			t.Errorf("no log line says why it exited:\n%s", p.logs())
		}
	})
	t.Run("detach", func(t *testing.T) {
		p, w := start(t)
		if _, err := w.Write([]byte("detach\n")); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		time.Sleep(500 * time.Millisecond)
		p.alive(t, "detach and close")
	})
	t.Run("not a pipe", func(t *testing.T) {
		bin, err := serverBinary()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--addr", "127.0.0.1:0", "--lifeline-fd", "0").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lifeline-fd=0") {
			t.Errorf("--lifeline-fd on a non-pipe: err %v, output %s; want a refusal naming it", err, out)
		}
	})
}

// forgeMain sends signal os.Args[1] to PID 1 with a forged siginfo
// (si_code SI_QUEUE) through rt_sigqueueinfo and prints the errno.
const forgeMain = `package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func main() {
	sig, _ := strconv.Atoi(os.Args[1])
	var info [128]byte
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	_, _, e := syscall.RawSyscall(syscall.SYS_RT_SIGQUEUEINFO, 1, uintptr(sig), uintptr(unsafe.Pointer(&info)))
	fmt.Println(int(e))
}
`

// TestBinaryInitRefusesForgedFaults: with --init the server and its
// commands run under its own seccomp filter (and no_new_privs), which
// refuses a fault signal with a forged siginfo: sent to PID 1 it would
// crash the Go runtime. Other signals still go through (and are dropped).
func TestBinaryInitRefusesForgedFaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(forgeMain), 0o644); err != nil {
		t.Fatal(err)
	}
	forge := filepath.Join(dir, "forge")
	build := exec.Command("go", "build", "-o", forge, filepath.Join(dir, "main.go"))
	build.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the forging program: %v\n%s", err, out)
	}

	status := "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '"
	p, _ := startAsPID1(t, "--init")
	if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": status}); res.Stdout != "NoNewPrivs: 1\nSeccomp: 2\n" {
		t.Errorf("a command under --init: %q, want no_new_privs and a seccomp filter", res.Stdout)
	}
	for _, sig := range []int{4, 5, 7, 8, 11, 16, 31} {
		res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": fmt.Sprintf("%s %d", forge, sig)})
		if res.Stdout != fmt.Sprintf("%d\n", syscall.EPERM) {
			t.Errorf("forged signal %d: %+v, want errno EPERM", sig, res)
		}
		p.alive(t, fmt.Sprintf("forged signal %d", sig))
	}
	for _, sig := range []int{1, 10, 15, 34, 64} {
		if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": fmt.Sprintf("%s %d", forge, sig)}); res.Stdout != "0\n" {
			t.Errorf("signal %d with SI_QUEUE: %+v, want sent (errno 0)", sig, res)
		}
		p.alive(t, fmt.Sprintf("signal %d with SI_QUEUE", sig))
	}

	// The same fault signals asked for on a pipe's I/O readiness
	// (F_SETOWN 1, F_SETSIG): the kernel sends them with si_code SI_SIGIO,
	// a real fault to the Go runtime. Refused too; other signals are not.
	attack := buildAttack(t)
	for _, sig := range []int{4, 7, 8, 11} {
		cmd := fmt.Sprintf("%s setsig 1 %d; sleep 0.2", attack, sig)
		if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": cmd}); !strings.HasPrefix(res.Stdout, "REFUSED operation not permitted") {
			t.Errorf("F_SETSIG of signal %d at PID 1: %+v, want REFUSED", sig, res)
		}
		p.alive(t, fmt.Sprintf("F_SETSIG of signal %d", sig))
	}
	if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": attack + " setsig 1 10; sleep 0.2"}); !strings.HasPrefix(res.Stdout, "DONE ") {
		t.Errorf("F_SETSIG of SIGUSR1 at PID 1 under --init: %+v, want allowed (and dropped)", res)
	}
	p.alive(t, "F_SETSIG of SIGUSR1")

	plain := startBinary(t, os.Environ())
	if res := plain.execute(t, http.DefaultClient, plain.url, map[string]any{"command": status}); !strings.Contains(res.Stdout, "Seccomp: 0") {
		t.Errorf("a command without --init: %q, want no seccomp filter of the server's", res.Stdout)
	}
}
