package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
)

// ignoredAtStart are the signals ignoringParent ignores: what nohup
// (HUP), a shell running a job in the background (INT, QUIT), a
// supervisor or a shell with traps hand a server they start.
var ignoredAtStart = []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGPIPE,
	syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}

// ignoringParent is a command prefix that starts its arguments with
// ignoredAtStart ignored: a shell that traps them to the empty action (SIG_IGN, which
// execve keeps) and execs the rest.
func ignoringParent() []string {
	var names []string
	for _, s := range ignoredAtStart {
		names = append(names, fmt.Sprint(int(s)))
	}
	return []string{"/bin/sh", "-c", "trap '' " + strings.Join(names, " ") + `; exec "$@"`, "sh"}
}

// ignoredMask is ignoredAtStart as /proc/<pid>/status shows it.
func ignoredMask() uint64 {
	var m uint64
	for _, s := range ignoredAtStart {
		m |= 1 << (uint(s) - 1)
	}
	return m
}

// libcSignals are the SigIgn bits of signals 32 and 33, which no Go
// program can take over (package sigdefault); GNU make starts its
// recipes, and so this test under make unit, with both ignored.
const libcSignals = 1<<31 | 1<<32

// sigIgn parses the SigIgn line out of a /proc/<pid>/status text, without
// libcSignals.
func sigIgn(t *testing.T, status string) uint64 {
	t.Helper()
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			var m uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &m); err != nil {
				t.Fatalf("SigIgn line %q: %v", line, err)
			}
			return m &^ libcSignals
		}
	}
	t.Fatalf("no SigIgn line in %q", status)
	return 0
}

const statusCmd = "cat /proc/self/status"

// TestIgnoringParentIgnores: the prefix the tests below start servers
// with really hands its command the signals ignored.
func TestIgnoringParentIgnores(t *testing.T) {
	argv := append(ignoringParent(), "cat", "/proc/self/status")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sigIgn(t, string(out)), ignoredMask(); got&want != want {
		t.Fatalf("SigIgn %016x under the ignoring parent, want at least %016x", got, want)
	}
}

// TestBinaryCommandsStartWithDefaultSignals: a server started with
// signals ignored (nohup, a supervisor, a shell's traps) does not pass
// them on: commands of /execute and of the process API start with no
// signal ignored (but libcSignals), with and without --init. The server
// itself still ignores SIGHUP, as its parent asked.
func TestBinaryCommandsStartWithDefaultSignals(t *testing.T) {
	for _, args := range [][]string{nil, {"--init"}} {
		t.Run(fmt.Sprintf("args=%q", args), func(t *testing.T) {
			dir := t.TempDir()
			grpcSock := filepath.Join(dir, "g.sock")
			args = append([]string{"--grpc-addr", "unix:" + grpcSock}, args...)
			p := startWrapped(t, ignoringParent(), []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}, args...)

			res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": statusCmd})
			if res.ExitCode != 0 {
				t.Fatalf("%s: %+v", statusCmd, res)
			}
			if m := sigIgn(t, res.Stdout); m != 0 {
				t.Errorf("/execute: a command starts with SigIgn %016x, want 0", m)
			}

			conn, err := processclient.Dial("unix:" + grpcSock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			pres, err := execOnce(t, conn, statusCmd)
			if err != nil {
				t.Fatalf("process API Execute: %v\n%s", err, p.logs())
			}
			if m := sigIgn(t, string(pres.Stdout)); pres.ExitCode != 0 || m != 0 {
				t.Errorf("process API: a command starts with SigIgn %016x (exit %d), want 0", m, pres.ExitCode)
			}

			if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			p.alive(t, "SIGHUP to a server started with SIGHUP ignored")
		})
	}
}

// TestCompanionAloneCommandsStartWithDefaultSignals: the process API
// companion run by hand under a parent that ignores signals does not pass
// them on either.
func TestCompanionAloneCommandsStartWithDefaultSignals(t *testing.T) {
	bin, err := processAPIBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	grpcSock := filepath.Join(dir, "g.sock")
	argv := append(ignoringParent(), bin, "--root-dir", filepath.Join(dir, "root"), "--grpc-addr", "unix:"+grpcSock)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Msg == "sandboxd listening" {
				close(listening)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("sandbox-processapi did not listen within 30 s")
	}
	conn, err := processclient.Dial("unix:" + grpcSock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := execOnce(t, conn, statusCmd)
	if err != nil {
		t.Fatal(err)
	}
	if m := sigIgn(t, string(res.Stdout)); res.ExitCode != 0 || m != 0 {
		t.Errorf("a command starts with SigIgn %016x (exit %d), want 0", m, res.ExitCode)
	}
}
