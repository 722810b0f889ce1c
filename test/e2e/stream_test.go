//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestStreamFirstChunk runs a 2 s command through the agent-sandbox
// backend's ExecStream on the real node, in port-forward mode (commands
// over a client-go port-forward to the pod's process API) and direct mode
// (the router's URL for files; commands still port-forwarded), and checks
// that its first output arrives before it ends.
//
// It and TestClaimTTLOwnerKilled run in parallel (after every other test):
// the TTL test spends half a minute waiting on the controller.
func TestStreamFirstChunk(t *testing.T) {
	t.Parallel()
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

// TestClaimTTLOwnerKilled: an mcp-server with --claim-ttl opens a claim and
// is killed with SIGKILL; the controller deletes the claim after its TTL.
func TestClaimTTLOwnerKilled(t *testing.T) {
	t.Parallel()
	server := binary(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	rt := runcTarget
	activate(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	label := fmt.Sprintf("ttl-%d", time.Now().UnixNano())
	ttl := 30 * time.Second
	cmd := exec.Command(server, append(backendArgs(rt, modes[0]), "--claim-ttl="+ttl.String(), "--labels=e2e-run="+label)...)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start mcp-server: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "echo alive"}})
	if err != nil || res.IsError {
		t.Fatalf("run_go_code: %+v %v", res, err)
	}
	b := newBackend(ctx, t, rt, modes[0])
	claims, err := b.ListClaims(ctx, "e2e-run="+label)
	if err != nil || len(claims) != 1 || claims[0].ShutdownTime.IsZero() {
		t.Fatalf("claims labelled e2e-run=%s: %+v %v", label, claims, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	for {
		left, err := b.ListClaims(ctx, "e2e-run="+label)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			t.Logf("claim %s gone %s after its owner was killed (TTL %s)", claims[0].Name, time.Since(killed).Round(time.Second), ttl)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("claim %s still there %s after its owner was killed (TTL %s, shutdown time %s)", claims[0].Name, time.Since(killed), ttl, left[0].ShutdownTime)
		}
		time.Sleep(time.Second)
	}
}
