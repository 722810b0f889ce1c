package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The built server with --stateless on the real local backend: a go-sdk
// client (MCP 2026-07-28) cancels a run_go_code call in a handle's
// sandbox; its command's processes are gone soon after, far within the
// 31 s the command would run, and its last step never happens. A
// liveness check with a generous deadline, not a speed assertion.
func TestStatelessCancelStopsCommand(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, logs := startLocalHTTP(t, ctx, "--stateless")
	cs, err := srv.Target().Connect(ctx, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, tail(logs.String(), 3000))
	}
	defer cs.Close()
	id := callTool(t, ctx, cs, "create_sandbox", map[string]any{"ttl_seconds": 120})["sandbox_id"].(string)
	defer callTool(t, ctx, cs, "delete_sandbox", map[string]any{"sandbox_id": id})

	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "run_go_code",
			Arguments: map[string]any{"sandbox_id": id, "command": "touch started; sleep 31; touch finished"}})
		errc <- err
	}()
	// Another call in the same sandbox lists what runs there: the pattern
	// matches "sleep 31" but not its own command line.
	running := func() string {
		return callTool(t, ctx, cs, "run_go_code", map[string]any{"sandbox_id": id,
			"command": `ls; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -o 'sleep 3[1]' || true`})["stdout"].(string)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(running(), "sleep 31") {
		if time.Now().After(deadline) {
			t.Fatalf("the command never started\n%s", tail(logs.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		out := running()
		if !strings.Contains(out, "sleep 31") {
			if strings.Contains(out, "finished") || !strings.Contains(out, "started") {
				t.Fatalf("after the cancel: %q", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled command still runs 20 s later: %q\n%s", out, tail(logs.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
