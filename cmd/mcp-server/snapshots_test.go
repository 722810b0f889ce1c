package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
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
