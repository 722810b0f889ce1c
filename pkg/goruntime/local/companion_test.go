package local_test

import (
	"context"
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
	// A command kills the companion running it.
	// Its stream breaks (an error, or no exit status): either is fine.
	_, _ = ss.ExecStream(ctx, goruntime.ExecRequest{Command: "kill -KILL $PPID; sleep 5"}, func(goruntime.Chunk) {})
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
