package local_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestProcessAPICompanionInSandbox: streamed commands run under the
// process API companion (sandbox-processapi, bound next to the server),
// which a command cannot ptrace or read (not dumpable) but can kill; the
// server then starts a new one for the next streamed command.
func TestProcessAPICompanionInSandbox(t *testing.T) {
	_, ss := streamingSandbox(t, testOptions())
	ctx := context.Background()
	run := func(cmd string) *goruntime.ExecResult {
		t.Helper()
		res, err := ss.ExecStream(ctx, goruntime.ExecRequest{Command: cmd}, func(goruntime.Chunk) {})
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		return res
	}
	res := run(`echo "$(cat /proc/$PPID/comm)"; for f in environ mem; do head -c1 /proc/$PPID/$f >/dev/null 2>&1 && echo "$f readable" || echo "$f denied"; done`)
	if res.Stdout != "sandbox-process\nenviron denied\nmem denied\n" {
		t.Fatalf("the command's parent and what it can read of it:\n%s%s", res.Stdout, res.Stderr)
	}
	if err := ss.WriteFile(ctx, "keep.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	// A command kills the companion running it (kill -9 -1 does too).
	// Its stream breaks (an error, or no exit status): either is fine, but
	// the error must not say the sandbox is gone: it is not, and callers
	// (mcp-server) delete a sandbox that is.
	for _, cmd := range []string{"kill -KILL $PPID; sleep 5", "kill -9 -1; sleep 5"} {
		_, err := ss.ExecStream(ctx, goruntime.ExecRequest{Command: cmd}, func(goruntime.Chunk) {})
		if errors.Is(err, goruntime.ErrSandboxGone) {
			t.Fatalf("%q: the live sandbox was reported gone: %v", cmd, err)
		}
	}
	if b, err := ss.ReadFile(ctx, "keep.txt"); err != nil || string(b) != "kept" {
		t.Fatalf("keep.txt after the companion was killed: %q, %v", b, err)
	}
	var err error
	for i := 0; i < 3; i++ {
		var r *goruntime.ExecResult
		if r, err = ss.ExecStream(ctx, goruntime.ExecRequest{Command: "echo again"}, func(goruntime.Chunk) {}); err == nil {
			if strings.TrimSpace(r.Stdout) != "again" {
				t.Fatalf("after the kill: %+v", r)
			}
			return
		}
	}
	t.Fatalf("streamed command after the companion was killed: %v", err)
}
