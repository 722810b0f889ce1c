package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// structured decodes a result's structuredContent into T.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	if res.StructuredContent == nil {
		t.Fatalf("no structuredContent; content: %s", text(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return out
}

// mustOK fails the test when res is an error result.
func mustOK(t *testing.T, res *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	return res
}

func TestHandleTools(t *testing.T) {
	s, fake := newTestServer(t, Config{MaxTTL: time.Hour})
	cs := connectMemory(t, s, nil)
	res := mustOK(t, call(t, cs, "create_sandbox", map[string]any{"ttl_seconds": 600, "labels": map[string]any{"project": "demo"}}))
	info := structured[SandboxInfo](t, res)
	if !goruntime.ValidHandleID(info.SandboxID) || !strings.Contains(text(res), info.SandboxID) {
		t.Fatalf("create_sandbox: %+v, text %q", info, text(res))
	}
	if info.TTLSeconds != 600 || info.Labels["project"] != "demo" {
		t.Errorf("create_sandbox: %+v", info)
	}
	id := info.SandboxID

	run := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"sandbox_id": id, "files": map[string]any{"h.txt": "in the handle"}, "command": "cat h.txt"})))
	if run.SandboxID != id || run.Stdout != "in the handle" {
		t.Fatalf("run_go_code with sandbox_id: %+v", run)
	}
	rd := structured[ReadOutput](t, mustOK(t, call(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "h.txt"})))
	if rd.Content != "in the handle" || rd.SandboxID != id {
		t.Fatalf("read_file with sandbox_id: %+v", rd)
	}
	ls := structured[ListOutput](t, mustOK(t, call(t, cs, "list_files", map[string]any{"sandbox_id": id})))
	if ls.SandboxID != id || len(ls.Entries) != 1 {
		t.Fatalf("list_files with sandbox_id: %+v", ls)
	}
	// The session's own sandbox is another one.
	if res := call(t, cs, "read_file", map[string]any{"path": "h.txt"}); !res.IsError {
		t.Fatalf("the session's sandbox has the handle's file: %s", text(res))
	}
	own := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"command": "true"})))
	if own.SandboxID == "" || own.SandboxID == id {
		t.Fatalf("the session's sandbox reported as %q (handle %s)", own.SandboxID, id)
	}
	ck := structured[CheckOutput](t, call(t, cs, "check_go_code", map[string]any{"sandbox_id": id}))
	if ck.SandboxID != id {
		t.Errorf("check_go_code named %q", ck.SandboxID)
	}
	rs := structured[ResetOutput](t, mustOK(t, call(t, cs, "reset_sandbox", map[string]any{"sandbox_id": id})))
	if !rs.Reset || rs.SandboxID != id {
		t.Errorf("reset_sandbox with sandbox_id: %+v", rs)
	}

	list := structured[ListSandboxesOutput](t, mustOK(t, call(t, cs, "list_sandboxes", map[string]any{})))
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].SandboxID != id || list.Sandboxes[0].Labels["project"] != "demo" || list.Sandboxes[0].ExpiresAt == "" {
		t.Fatalf("list_sandboxes: %+v", list)
	}
	del := structured[DeleteOutput](t, mustOK(t, call(t, cs, "delete_sandbox", map[string]any{"sandbox_id": id})))
	if !del.Deleted || del.SandboxID != id {
		t.Fatalf("delete_sandbox: %+v", del)
	}
	if res := call(t, cs, "run_go_code", map[string]any{"sandbox_id": id, "command": "true"}); !res.IsError || !strings.Contains(text(res), "not found") {
		t.Fatalf("run_go_code on a deleted handle: %s", text(res))
	}
	if fake.Handles() != 0 {
		t.Errorf("%d handles left after delete", fake.Handles())
	}
}

func TestHandleToolsRefuseBadInput(t *testing.T) {
	s, fake := newTestServer(t, Config{MaxTTL: time.Hour, MaxSandboxesPerPrincipal: 1})
	cs := connectMemory(t, s, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"create_sandbox", map[string]any{"ttl_seconds": 7200}, "at most 3600"},
		{"create_sandbox", map[string]any{"ttl_seconds": 0.5}, "at least 1"},
		{"create_sandbox", map[string]any{"labels": map[string]any{"bad key": "v"}}, "label key"},
		{"delete_sandbox", map[string]any{}, "sandbox_id"},
		{"delete_sandbox", map[string]any{"sandbox_id": "nope"}, "not found"},
		{"read_file", map[string]any{"sandbox_id": "../../etc", "path": "x"}, "not found"},
	} {
		res := call(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %v: %s (want an error with %q)", tc.tool, tc.args, text(res), tc.want)
		}
	}
	if fake.Handles() != 0 {
		t.Fatalf("refused creates made %d handles", fake.Handles())
	}
	mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))
	if res := call(t, cs, "create_sandbox", map[string]any{}); !res.IsError || !strings.Contains(text(res), "--max-sandboxes-per-principal") {
		t.Fatalf("second create with a limit of 1: %s", text(res))
	}
}

// bearer sends a bearer token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectAs(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, url, &http.Client{Transport: bearer{token}})
}

func connectWith(t *testing.T, url string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var testPrincipals = []mcphttp.Principal{{Name: "alice", Token: "alice-token-0123456789"}, {Name: "bob", Token: "bob-token-0123456789ab"}}

// Another principal's sandbox_id answers exactly as a missing one, in
// every tool; the owner's keeps working.
func TestForeignPrincipalGetsNotFound(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		s, _ := newTestServer(t, Config{Stateless: stateless, HTTP: mcphttp.Config{Principals: testPrincipals}})
		url := httpServer(t, s)
		alice, bob := connectAs(t, url, testPrincipals[0].Token, nil), connectAs(t, url, testPrincipals[1].Token, nil)
		id := structured[SandboxInfo](t, mustOK(t, call(t, alice, "create_sandbox", map[string]any{}))).SandboxID
		mustOK(t, call(t, alice, "run_go_code", map[string]any{"sandbox_id": id, "files": map[string]any{"secret.txt": "alice's"}, "command": "true"}))
		missing := goruntime.NewHandleID()
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{"run_go_code", map[string]any{"command": "cat secret.txt"}},
			{"read_file", map[string]any{"path": "secret.txt"}},
			{"list_files", map[string]any{}},
			{"check_go_code", map[string]any{}},
			{"reset_sandbox", map[string]any{}},
			{"delete_sandbox", map[string]any{}},
		} {
			answer := func(sid string) string {
				args := map[string]any{"sandbox_id": sid}
				for k, v := range tc.args {
					args[k] = v
				}
				res := call(t, bob, tc.tool, args)
				if !res.IsError {
					t.Fatalf("stateless=%v: bob's %s on %s succeeded: %s", stateless, tc.tool, sid, text(res))
				}
				return strings.ReplaceAll(text(res), sid, "ID")
			}
			if foreign, miss := answer(id), answer(missing); foreign != miss || !strings.Contains(foreign, "not found") {
				t.Errorf("stateless=%v: %s: alice's ID answers %q, a missing one %q", stateless, tc.tool, foreign, miss)
			}
		}
		if l := structured[ListSandboxesOutput](t, mustOK(t, call(t, bob, "list_sandboxes", map[string]any{}))); len(l.Sandboxes) != 0 {
			t.Errorf("bob lists %+v", l.Sandboxes)
		}
		rd := structured[ReadOutput](t, mustOK(t, call(t, alice, "read_file", map[string]any{"sandbox_id": id, "path": "secret.txt"})))
		if rd.Content != "alice's" {
			t.Errorf("alice's file after bob's tries: %+v", rd)
		}
	}
}

// A go-sdk client negotiates MCP 2026-07-28 with a stateless server and
// works in a sandbox by sandbox_id across connections; a call without
// sandbox_id makes one and names it.
func TestStatelessServesNewProtocol(t *testing.T) {
	s, _ := newTestServer(t, Config{Stateless: true})
	url := httpServer(t, s)
	cs := connectHTTP(t, url)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	id := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))).SandboxID
	run := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"sandbox_id": id,
		"files": map[string]any{"go.mod": "module m\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() { println(\"hi\") }\n"}, "command": "cat go.mod"})))
	if run.SandboxID != id || !strings.Contains(run.Stdout, "module m") {
		t.Fatalf("run_go_code with sandbox_id: %+v", run)
	}
	// Another connection (any replica) finds the files by ID.
	other := connectHTTP(t, url)
	if rd := structured[ReadOutput](t, mustOK(t, call(t, other, "read_file", map[string]any{"sandbox_id": id, "path": "go.mod"}))); !strings.Contains(rd.Content, "module m") {
		t.Fatalf("read from another connection: %+v", rd)
	}
	// Without sandbox_id: run_go_code makes a sandbox and names it;
	// read_file has nothing to read.
	res := mustOK(t, call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"x.txt": "x"}, "command": "cat x.txt"}))
	made := runOut(t, res)
	if !goruntime.ValidHandleID(made.SandboxID) || made.SandboxID == id || !strings.Contains(text(res), made.SandboxID) {
		t.Fatalf("run_go_code without sandbox_id: %+v\n%s", made, text(res))
	}
	if rd := structured[ReadOutput](t, mustOK(t, call(t, cs, "read_file", map[string]any{"sandbox_id": made.SandboxID, "path": "x.txt"}))); rd.Content != "x" {
		t.Fatalf("the sandbox a call made: %+v", rd)
	}
	if res := call(t, cs, "read_file", map[string]any{"path": "x.txt"}); !res.IsError || !strings.Contains(text(res), "sandbox_id is required") {
		t.Fatalf("read_file without sandbox_id on a stateless server: %s", text(res))
	}
	if n := s.OpenSandboxes(); n != 0 {
		t.Errorf("a stateless server holds %d session sandboxes", n)
	}
}

// noHandles is a backend without goruntime.HandleBackend.
type noHandles struct{ goruntime.Backend }

func TestStatelessNeedsHandles(t *testing.T) {
	s, _ := newTestServer(t, Config{Stateless: true, Backend: noHandles{goruntimetest.New(t.TempDir())}})
	if _, err := s.Handler(); err == nil || !strings.Contains(err.Error(), "--stateless") {
		t.Fatalf("Handler on a backend without handles: %v", err)
	}
}

// --max-sandboxes bounds handles with the sessions' sandboxes: a create
// past it, or a session's first call past it, is refused naming the
// flag; mcp_handles reports the backend's live handles, with no label.
func TestMaxSandboxesBoundsHandles(t *testing.T) {
	s, fake := newTestServer(t, Config{MaxSandboxes: 2})
	cs := connectMemory(t, s, nil)
	if v, ok := scrapeOK(t, s, "mcp_handles"); !ok || v != 0 {
		t.Fatalf("mcp_handles before any create = %v (present %v), want 0", v, ok)
	}
	first := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))).SandboxID
	mustOK(t, call(t, cs, "create_sandbox", map[string]any{}))
	if v, _ := scrapeOK(t, s, "mcp_handles"); v != 2 {
		t.Errorf("mcp_handles = %v, want 2", v)
	}
	if res := call(t, cs, "create_sandbox", map[string]any{}); !res.IsError || !strings.Contains(text(res), "(--max-sandboxes)") {
		t.Fatalf("third create with --max-sandboxes=2: %s", text(res))
	}
	// The session's own sandbox counts too: two handles fill the server.
	if res := call(t, cs, "run_go_code", map[string]any{"command": "true"}); !res.IsError || !strings.Contains(text(res), "2 of 2 in use") {
		t.Fatalf("the session's first call with 2 handles of 2: %s", text(res))
	}
	mustOK(t, call(t, cs, "delete_sandbox", map[string]any{"sandbox_id": first}))
	mustOK(t, call(t, cs, "run_go_code", map[string]any{"command": "true"}))
	if res := call(t, cs, "create_sandbox", map[string]any{}); !res.IsError || !strings.Contains(text(res), "(--max-sandboxes)") {
		t.Fatalf("create with a handle and the session's sandbox open, of 2: %s", text(res))
	}
	if v, _ := scrapeOK(t, s, "mcp_handles"); v != 1 || fake.Handles() != 1 {
		t.Errorf("mcp_handles = %v, fake holds %d; want 1", v, fake.Handles())
	}
}

// TestStatelessRefusedCallLeavesNoSandbox: on a stateless server a
// run_go_code without sandbox_id whose files the Session refuses (it
// checks them in the sandbox the call made) leaves no sandbox behind: its
// error names none, so nobody could use or delete it.
func TestStatelessRefusedCallLeavesNoSandbox(t *testing.T) {
	s, _ := newTestServer(t, Config{Stateless: true})
	cs := connectHTTP(t, httpServer(t, s))
	res := call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"../x.go": "x"}, "command": "true"})
	if !res.IsError || !strings.Contains(text(res), "escapes") {
		t.Fatalf("run_go_code with a path out of /app: %s", text(res))
	}
	if left := structured[ListSandboxesOutput](t, mustOK(t, call(t, cs, "list_sandboxes", map[string]any{}))).Sandboxes; len(left) != 0 {
		t.Errorf("a refused call left %d sandboxes: %+v", len(left), left)
	}
}
