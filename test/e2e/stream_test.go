//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestStreamFirstChunk runs a 2 s command through the agent-sandbox
// backend's ExecStream on the real node, in port-forward mode (commands
// over a client-go port-forward to the pod's process API) and direct mode
// (the router's URL for files; commands still port-forwarded), and checks
// that its first output arrives before it ends.
func TestStreamFirstChunk(t *testing.T) {
	rt := runcTarget
	activate(t, rt)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sb := openSandbox(ctx, t, rt, m)
			start := time.Now()
			var first time.Duration
			res, err := sb.ExecStream(ctx, goruntime.ExecRequest{Command: "echo first; sleep 2; echo last", Timeout: time.Minute},
				func(goruntime.Chunk) {
					if first == 0 {
						first = time.Since(start)
					}
				})
			if err != nil {
				t.Fatalf("ExecStream: %v", err)
			}
			total := time.Since(start)
			if res.Stdout != "first\nlast\n" || res.ExitCode != 0 {
				t.Fatalf("ExecStream = %+v", res)
			}
			t.Logf("%s: first chunk at %s, command done at %s", m.name, first.Round(time.Millisecond), total.Round(time.Millisecond))
			if first == 0 || total-first < 1500*time.Millisecond {
				t.Fatalf("first chunk at %s, done at %s: not streamed", first, total)
			}
		})
	}
}
