package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The built server on the real local backend: a snapshot taken through
// one server outlives it; a server restarted on the same state directory
// lists it, starts a sandbox from it whose built binary runs, and forks
// that sandbox two ways, each fork with the files and a change of its own.
func TestSnapshotSurvivesServerRestart(t *testing.T) {
	requireBwrap(t)
	stateDir := seededStateDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	logs := &logSink{}
	cs, cmd := stdioServer(t, ctx, stateDir, logs)
	id := callTool(t, ctx, cs, "create_sandbox", map[string]any{"ttl_seconds": 300})["sandbox_id"].(string)
	out := callTool(t, ctx, cs, "run_go_code", map[string]any{"sandbox_id": id, "command": "go build -o app . && echo built",
		"files": map[string]any{"go.mod": "module kept\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() { println(\"snapshot binary runs\") }\n"}})
	if !strings.Contains(fmt.Sprint(out["stdout"]), "built") {
		t.Fatalf("build: %v", out)
	}
	snap := callTool(t, ctx, cs, "snapshot_sandbox", map[string]any{"sandbox_id": id})["snapshot_id"].(string)
	callTool(t, ctx, cs, "delete_sandbox", map[string]any{"sandbox_id": id})
	_ = cs.Close()
	_ = cmd.Wait()

	cs2, cmd2 := stdioServer(t, ctx, stateDir, logs)
	defer func() { _ = cs2.Close(); _ = cmd2.Wait() }()
	if l := callTool(t, ctx, cs2, "list_snapshots", map[string]any{}); !strings.Contains(fmt.Sprint(l["snapshots"]), snap) {
		t.Fatalf("list_snapshots after the restart: %v\n%s", l, tail(logs.String(), 3000))
	}
	from := callTool(t, ctx, cs2, "create_sandbox", map[string]any{"from_snapshot": snap})["sandbox_id"].(string)
	if run := callTool(t, ctx, cs2, "run_go_code", map[string]any{"sandbox_id": from, "command": "./app"}); !strings.Contains(fmt.Sprint(run["stderr"]), "snapshot binary runs") {
		t.Fatalf("./app in the sandbox from the snapshot: %v", run)
	}
	fork := callTool(t, ctx, cs2, "fork_sandbox", map[string]any{"sandbox_id": from, "count": 2})
	forks, _ := fork["forks"].([]any)
	if len(forks) != 2 {
		t.Fatalf("fork_sandbox: %v", fork)
	}
	var ids []string
	for i, f := range forks {
		fid, _ := f.(map[string]any)["sandbox_id"].(string)
		if fid == "" || fid == from {
			t.Fatalf("fork %d: %v", i, f)
		}
		ids = append(ids, fid)
		callTool(t, ctx, cs2, "run_go_code", map[string]any{"sandbox_id": fid, "command": fmt.Sprintf("echo fork%d >mine && rm app", i)})
	}
	for i, fid := range ids {
		run := callTool(t, ctx, cs2, "run_go_code", map[string]any{"sandbox_id": fid, "command": "cat mine; ls"})
		if got := fmt.Sprint(run["stdout"]); !strings.HasPrefix(got, fmt.Sprintf("fork%d\n", i)) || strings.Contains(got, "app\n") {
			t.Errorf("fork %d: %q", i, got)
		}
	}
	if run := callTool(t, ctx, cs2, "run_go_code", map[string]any{"sandbox_id": from, "command": "ls"}); strings.Contains(fmt.Sprint(run["stdout"]), "mine") || !strings.Contains(fmt.Sprint(run["stdout"]), "app") {
		t.Errorf("the forked sandbox after its forks' changes: %v", run)
	}
	for _, sid := range append(ids, from) {
		callTool(t, ctx, cs2, "delete_sandbox", map[string]any{"sandbox_id": sid})
	}
	callTool(t, ctx, cs2, "delete_snapshot", map[string]any{"snapshot_id": snap})
}

// --snapshot-per-owner-mb reaches the local backend's Options: a server
// run in process with a share of 1 MiB refuses the snapshot of a sandbox
// holding 2 MiB of its own with the share's error, naming the share
// (1048576 bytes), while the whole quota (--snapshot-mb, 4 GiB by
// default) has room.
func TestSnapshotPerOwnerFlag(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	logs := &logSink{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, serverArgs(t, "--state-dir="+seededStateDir(t), "--local-warm-pool-size=0", "--snapshot-per-owner-mb=1"), toServer, fromServer, logs)
		_ = fromServer.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "snapshot-share-test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatalf("connect to the server run in process: %v\n%s", err, logs.String())
	}
	callTool(t, ctx, cs, "run_go_code", map[string]any{"command": "head -c 2097152 /dev/urandom > blob"})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "snapshot_sandbox", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("snapshot_sandbox: %v", err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError {
		// Taken after all: not left in the shared state directory.
		id, _ := res.StructuredContent.(map[string]any)["snapshot_id"].(string)
		callTool(t, ctx, cs, "delete_snapshot", map[string]any{"snapshot_id": id})
	}
	if !res.IsError || !strings.Contains(text.String(), "an owner's share of the quota is 1048576 bytes") {
		t.Errorf("snapshot_sandbox of 2 MiB with --snapshot-per-owner-mb=1: error %v, %q; want refused by the owner's share of 1048576 bytes", res.IsError, text.String())
	}
	_ = cs.Close()
	if got := <-code; got != 0 {
		t.Errorf("run exited %d once the client left; log:\n%s", got, tail(logs.String(), 3000))
	}
}
