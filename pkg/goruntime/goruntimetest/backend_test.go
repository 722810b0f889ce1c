package goruntimetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func open(t *testing.T) (*Backend, *Sandbox) {
	t.Helper()
	b := New(t.TempDir())
	sb, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b, sb.(*Sandbox)
}

// TestExecKeepsTheContract: exit codes, 124 past the timeout with the
// output so far, 128+N for a signal, invalid UTF-8 one U+FFFD a byte.
func TestExecKeepsTheContract(t *testing.T) {
	_, sb := open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		req      goruntime.ExecRequest
		exit     int
		stdout   string
		timedOut bool
	}{
		{goruntime.ExecRequest{Command: `echo "$X"; exit 3`, Env: map[string]string{"X": "y"}}, 3, "y\n", false},
		// 5 s: time for a busy machine's shell to print before the timeout.
		{goruntime.ExecRequest{Command: "echo started; sleep 30", Timeout: 5 * time.Second}, 124, "started\n", true},
		{goruntime.ExecRequest{Command: "kill -9 $$"}, 137, "", false},
		{goruntime.ExecRequest{Command: `printf 'a\377\376b'`}, 0, "a\uFFFD\uFFFDb", false},
	} {
		res, err := sb.Exec(ctx, tc.req)
		if err != nil {
			t.Fatalf("%q: %v", tc.req.Command, err)
		}
		if res.ExitCode != tc.exit || res.Stdout != tc.stdout || res.TimedOut != tc.timedOut {
			t.Errorf("%q: exit %d stdout %q timed out %v; want %d %q %v", tc.req.Command, res.ExitCode, res.Stdout, res.TimedOut, tc.exit, tc.stdout, tc.timedOut)
		}
	}
}

// TestCloseKillsAndPathsStayInside: Close ends a command in flight (its
// Exec fails with ErrSandboxGone) and the sandbox is gone for Attach;
// paths leaving the directory fail with ErrPathEscape; a killed sandbox
// fails every call with ErrSandboxGone.
func TestCloseKillsAndPathsStayInside(t *testing.T) {
	b, sb := open(t)
	ctx := context.Background()
	if _, err := sb.ReadFile(ctx, "../x"); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("ReadFile(../x) = %v, want ErrPathEscape", err)
	}
	if err := sb.WriteFile(ctx, "d/f", strings.NewReader("x")); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("WriteFile(d/f) = %v, want ErrPathEscape (a plain name only)", err)
	}
	if _, err := sb.ReadFile(ctx, "missing"); !errors.Is(err, goruntime.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "sleep 30"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Whenever Close came (before the command started or while it ran),
	// the command is killed: it does not run its 30 s.
	if err := <-done; !errors.Is(err, goruntime.ErrSandboxGone) || time.Since(start) >= 30*time.Second {
		t.Errorf("Exec during Close: %v after %v, want ErrSandboxGone before the command's 30 s", err, time.Since(start))
	}
	if _, err := b.Attach(ctx, sb.ID()); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("Attach after Close = %v, want ErrSandboxNotFound", err)
	}

	other, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other.(*Sandbox).Kill()
	if _, err := other.List(ctx, "."); !errors.Is(err, goruntime.ErrSandboxGone) {
		t.Errorf("List in a killed sandbox = %v, want ErrSandboxGone", err)
	}
}
