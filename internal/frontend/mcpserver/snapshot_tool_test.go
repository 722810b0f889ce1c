package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The try-three-fixes flow of docs/mcp.md: snapshot, fork three ways,
// each fork changes its own files, the original and the snapshot keep
// theirs; create_sandbox from_snapshot and restore_sandbox bring them
// back; list_snapshots and delete_snapshot manage them.
func TestSnapshotTools(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxTTL: time.Hour})
	cs := connectMemory(t, s, nil)
	id := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))).SandboxID
	mustOK(t, call(t, cs, "run_go_code", map[string]any{"sandbox_id": id, "files": map[string]any{"fix.txt": "none"}, "command": "true"}))

	snap := structured[SnapshotInfo](t, mustOK(t, call(t, cs, "snapshot_sandbox", map[string]any{"sandbox_id": id, "labels": map[string]any{"step": "before-fix"}})))
	if !goruntime.ValidHandleID(snap.SnapshotID) || snap.Labels["step"] != "before-fix" {
		t.Fatalf("snapshot_sandbox: %+v", snap)
	}
	fork := structured[ForkOutput](t, mustOK(t, call(t, cs, "fork_sandbox", map[string]any{"sandbox_id": id, "count": 3})))
	if len(fork.Forks) != 3 {
		t.Fatalf("fork_sandbox: %+v", fork)
	}
	for i, f := range fork.Forks {
		if f.Error != "" || !goruntime.ValidHandleID(f.SandboxID) || f.SandboxID == id {
			t.Fatalf("fork %d: %+v", i, f)
		}
		fix := []string{"a", "b", "c"}[i]
		mustOK(t, call(t, cs, "run_go_code", map[string]any{"sandbox_id": f.SandboxID, "command": "echo -n " + fix + " >fix.txt"}))
	}
	read := func(sid string) string {
		return structured[ReadOutput](t, mustOK(t, call(t, cs, "read_file", map[string]any{"sandbox_id": sid, "path": "fix.txt"}))).Content
	}
	for i, f := range fork.Forks {
		if got, want := read(f.SandboxID), []string{"a", "b", "c"}[i]; got != want {
			t.Errorf("fork %d holds %q, want its own fix %q", i, got, want)
		}
	}
	if got := read(id); got != "none" {
		t.Errorf("the original holds %q after its forks' fixes", got)
	}
	from := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{"from_snapshot": snap.SnapshotID}))).SandboxID
	if got := read(from); got != "none" {
		t.Errorf("create_sandbox from_snapshot holds %q", got)
	}
	mustOK(t, call(t, cs, "run_go_code", map[string]any{"sandbox_id": id, "command": "echo -n broken >fix.txt"}))
	rs := structured[RestoreOutput](t, mustOK(t, call(t, cs, "restore_sandbox", map[string]any{"sandbox_id": id, "snapshot_id": snap.SnapshotID})))
	if !rs.Restored || rs.SandboxID != id || read(id) != "none" {
		t.Errorf("restore_sandbox: %+v, file %q", rs, read(id))
	}
	ls := structured[ListSnapshotsOutput](t, mustOK(t, call(t, cs, "list_snapshots", map[string]any{})))
	if len(ls.Snapshots) != 1 || ls.Snapshots[0].SnapshotID != snap.SnapshotID {
		t.Fatalf("list_snapshots: %+v", ls)
	}
	mustOK(t, call(t, cs, "delete_snapshot", map[string]any{"snapshot_id": snap.SnapshotID}))
	if res := call(t, cs, "create_sandbox", map[string]any{"from_snapshot": snap.SnapshotID}); !res.IsError || !strings.Contains(text(res), "no snapshot of yours") {
		t.Errorf("create_sandbox from a deleted snapshot: %s", text(res))
	}
	if res := call(t, cs, "fork_sandbox", map[string]any{"sandbox_id": id, "count": 0}); !res.IsError {
		t.Errorf("fork_sandbox count 0: %s", text(res))
	}
}

// A fork past --max-sandboxes-per-principal fails alone, naming the
// flag; the others are made.
func TestForkReportsEachFork(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxTTL: time.Hour, MaxSandboxesPerPrincipal: 3, MaxSandboxes: 10})
	cs := connectMemory(t, s, nil)
	id := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))).SandboxID
	fork := structured[ForkOutput](t, mustOK(t, call(t, cs, "fork_sandbox", map[string]any{"sandbox_id": id, "count": 4})))
	made := 0
	for i, f := range fork.Forks {
		switch {
		case f.SandboxID != "" && f.Error == "":
			made++
		case f.SandboxID == "" && strings.Contains(f.Error, "--max-sandboxes-per-principal"):
		default:
			t.Errorf("fork %d: %+v", i, f)
		}
	}
	if made != 2 {
		t.Errorf("%d forks made with room for 2: %+v", made, fork.Forks)
	}
}

// Another principal's snapshot_id answers exactly as a missing one.
func TestForeignSnapshotGetsNotFound(t *testing.T) {
	s, _ := newTestServer(t, Config{HTTP: mcphttp.Config{Principals: testPrincipals}})
	url := httpServer(t, s)
	alice, bob := connectAs(t, url, testPrincipals[0].Token, nil), connectAs(t, url, testPrincipals[1].Token, nil)
	id := structured[SandboxInfo](t, mustOK(t, call(t, alice, "create_sandbox", map[string]any{}))).SandboxID
	snap := structured[SnapshotInfo](t, mustOK(t, call(t, alice, "snapshot_sandbox", map[string]any{"sandbox_id": id}))).SnapshotID
	bobs := structured[SandboxInfo](t, mustOK(t, call(t, bob, "create_sandbox", map[string]any{}))).SandboxID
	missing := goruntime.NewHandleID()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"create_sandbox", map[string]any{}},
		{"restore_sandbox", map[string]any{"sandbox_id": bobs}},
		{"delete_snapshot", map[string]any{}},
	} {
		answer := func(sid string) string {
			args := map[string]any{"snapshot_id": sid}
			if tc.tool == "create_sandbox" {
				args = map[string]any{"from_snapshot": sid}
			}
			for k, v := range tc.args {
				args[k] = v
			}
			res := call(t, bob, tc.tool, args)
			if !res.IsError {
				t.Fatalf("bob's %s on %s succeeded: %s", tc.tool, sid, text(res))
			}
			return strings.ReplaceAll(text(res), sid, "ID")
		}
		if foreign, miss := answer(snap), answer(missing); foreign != miss || !strings.Contains(foreign, "not found") {
			t.Errorf("%s: alice's ID answers %q, a missing one %q", tc.tool, foreign, miss)
		}
	}
	if l := structured[ListSnapshotsOutput](t, mustOK(t, call(t, bob, "list_snapshots", map[string]any{}))); len(l.Snapshots) != 0 {
		t.Errorf("bob lists %+v", l.Snapshots)
	}
	// bob cannot fork alice's sandbox either.
	if res := call(t, bob, "fork_sandbox", map[string]any{"sandbox_id": id, "count": 1}); !res.IsError || !strings.Contains(text(res), "not found") {
		t.Errorf("bob forks alice's sandbox: %s", text(res))
	}
}
