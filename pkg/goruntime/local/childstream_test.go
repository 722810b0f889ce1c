package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestExecStreamReExecutedServer: with no sandbox-server binary, the local
// backend re-executes this test binary as the server (TestMain calls
// local.ServeIfChild; Options.ServerPath empty and none next to the test
// binary), which serves the process API in its own process
// rather than through the sandbox-processapi companion; a streamed command
// still streams (its first chunk arrives before it ends).
func TestExecStreamReExecutedServer(t *testing.T) {
	opts := testOptions()
	opts.ServerPath = ""
	sess := openSession(t, newBackend(t, opts))
	sb, ok := sess.Sandbox().(*local.Sandbox)
	if !ok {
		t.Fatalf("sandbox is %T, want *local.Sandbox", sess.Sandbox())
	}
	ss, ok := sess.Sandbox().(goruntime.StreamingSandbox)
	if !ok {
		t.Fatal("local sandbox does not implement goruntime.StreamingSandbox")
	}
	marker := filepath.Join(sb.Dir(), "app", "finished")
	var first string
	finishedAtFirst := false
	res, err := ss.ExecStream(context.Background(), goruntime.ExecRequest{
		Command: "echo first; sleep 1; touch finished; echo last",
	}, func(c goruntime.Chunk) {
		if first == "" {
			first = string(c.Data)
			_, err := os.Stat(marker)
			finishedAtFirst = err == nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if first != "first\n" || finishedAtFirst {
		t.Fatalf("first chunk %q (command finished by then: %v), want \"first\\n\" while it runs", first, finishedAtFirst)
	}
	if res.ExitCode != 0 || res.Stdout != "first\nlast\n" {
		t.Fatalf("result = %+v", res)
	}
}
