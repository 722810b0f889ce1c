//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// claimTTL is the flow "the owner of a claim with a TTL is killed": an
// mcp-server with --claim-ttl opens a claim and is killed with SIGKILL;
// the controller deletes the claim once its TTL has passed. The wait is
// half a minute of the controller's time, so TestRuntimes starts the flow
// (startClaimTTL), runs the corpus meanwhile and checks the end
// (claimTTL.gone) after it.
type claimTTL struct {
	b      *agentsandbox.Backend
	label  string
	claim  string
	ttl    time.Duration
	killed time.Time
}

// startClaimTTL opens a claim with the shortest TTL the backend takes
// through mcp-server in rt, checks it carries a shutdown time and kills
// the server.
func startClaimTTL(t *testing.T, rt *runtimeTarget) *claimTTL {
	server := binary(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	c := &claimTTL{label: fmt.Sprintf("ttl-%d", time.Now().UnixNano()), ttl: 30 * time.Second}
	cmd := exec.Command(server, append(backendArgs(rt, modes[0]), "--claim-ttl="+c.ttl.String(), "--labels=e2e-run="+c.label)...)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start mcp-server: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "echo alive"}})
	if err != nil || res.IsError {
		t.Fatalf("run_go_code: %+v %v", res, err)
	}
	c.b = newBackend(ctx, t, rt, modes[0])
	claims, err := c.b.ListClaims(ctx, "e2e-run="+c.label)
	if err != nil || len(claims) != 1 || claims[0].ShutdownTime.IsZero() {
		t.Fatalf("claims labelled e2e-run=%s: %+v %v", c.label, claims, err)
	}
	c.claim = claims[0].Name
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.killed = time.Now()
	_ = cmd.Wait()
	return c
}

// gone waits until the controller has deleted the claim, at most 4
// minutes after its owner was killed.
func (c *claimTTL) gone(t *testing.T) {
	deadline := c.killed.Add(4 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		left, err := c.b.ListClaims(ctx, "e2e-run="+c.label)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			t.Logf("claim %s gone %s after its owner was killed (TTL %s)", c.claim, time.Since(c.killed).Round(time.Second), c.ttl)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s still there %s after its owner was killed (TTL %s, shutdown time %s)", c.claim, time.Since(c.killed), c.ttl, left[0].ShutdownTime)
		}
		time.Sleep(time.Second)
	}
}
