package mcpserver

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
)

// mustRefuse fails the test unless res is an error result containing
// every one of want.
func mustRefuse(t *testing.T, what string, res *mcp.CallToolResult, want ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("%s succeeded, want a refusal: %s", what, text(res))
	}
	for _, w := range want {
		if !strings.Contains(text(res), w) {
			t.Errorf("%s: %q does not say %q", what, text(res), w)
		}
	}
}

// TestPrincipalCannotLockOutOthers (issue 40): with two principals and
// the default limits (--max-sandboxes 16, so an auto share of 8 each),
// alice opens ordinary stateful MCP sessions, one run_go_code each, as
// many as the server would hold; past her share she is refused with an
// error naming the flag and what to do, while bob still gets a session's
// sandbox (run_go_code) and a handle (create_sandbox). Ending one of
// alice's sessions gives her its slot back.
func TestPrincipalCannotLockOutOthers(t *testing.T) {
	cfg := Defaults()
	cfg.HTTP.Principals = testPrincipals
	s, _ := newTestServer(t, cfg)
	if s.cfg.MaxSandboxesPerPrincipal != 8 {
		t.Fatalf("auto share with two principals and --max-sandboxes=16: %d, want 8", s.cfg.MaxSandboxesPerPrincipal)
	}
	url := httpServer(t, s)
	aliceToken, bobToken := testPrincipals[0].Token, testPrincipals[1].Token

	var alice []*mcp.ClientSession
	var refused *mcp.CallToolResult
	for range cfg.MaxSandboxes {
		cs := connectAs(t, url, aliceToken, nil)
		res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
		if res.IsError {
			refused = res
			break
		}
		alice = append(alice, cs)
	}
	if len(alice) != 8 || refused == nil {
		t.Fatalf("alice's sessions opened %d sandboxes of the server's %d before a refusal (refused: %v); want her share, 8",
			len(alice), cfg.MaxSandboxes, refused != nil)
	}
	mustRefuse(t, "alice's ninth session", refused, `"alice" already holds 8 of the 8`, "(8 for its sessions, 0 durable)",
		"--max-sandboxes-per-principal", "end an MCP session", "delete_sandbox")
	mustRefuse(t, "alice's create_sandbox at her share", call(t, alice[0], "create_sandbox", map[string]any{}),
		"--max-sandboxes-per-principal")

	bob := connectAs(t, url, bobToken, nil)
	mustOK(t, call(t, bob, "run_go_code", map[string]any{"command": "true"}))
	id := structured[SandboxInfo](t, mustOK(t, call(t, bob, "create_sandbox", map[string]any{}))).SandboxID
	mustOK(t, call(t, bob, "run_go_code", map[string]any{"sandbox_id": id, "command": "true"}))

	// Alice's open sandboxes keep serving her.
	mustOK(t, call(t, alice[1], "run_go_code", map[string]any{"command": "true"}))
	// One of her sessions ends: its slot is hers again.
	alice[0].Close()
	waitFor(t, func() bool { return s.OpenSandboxes() == 7+1 })
	mustOK(t, call(t, connectAs(t, url, aliceToken, nil), "run_go_code", map[string]any{"command": "true"}))
}

// TestPrincipalShareCountsEveryKind: a principal's sessions' sandboxes
// and its handles count against one share (explicit, 3): two handles and
// a session fill it, so a second session and a third handle are
// refused; delete_sandbox and the idle reaper each give a slot back.
func TestPrincipalShareCountsEveryKind(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxSandboxes: 6, MaxSandboxesPerPrincipal: 3, HTTP: mcphttp.Config{Principals: testPrincipals}})
	url := httpServer(t, s)
	aliceToken := testPrincipals[0].Token
	a1, a2 := connectAs(t, url, aliceToken, nil), connectAs(t, url, aliceToken, nil)
	h1 := structured[SandboxInfo](t, mustOK(t, call(t, a1, "create_sandbox", map[string]any{}))).SandboxID
	mustOK(t, call(t, a1, "create_sandbox", map[string]any{}))
	mustOK(t, call(t, a1, "run_go_code", map[string]any{"command": "true"}))
	mustRefuse(t, "alice's second session with 2 handles and a session of 3", call(t, a2, "run_go_code", map[string]any{"command": "true"}),
		`"alice" already holds 3 of the 3`, "(1 for its sessions, 2 durable)", "--max-sandboxes-per-principal")
	mustRefuse(t, "alice's third handle", call(t, a2, "create_sandbox", map[string]any{}), "--max-sandboxes-per-principal")

	mustOK(t, call(t, a1, "delete_sandbox", map[string]any{"sandbox_id": h1}))
	mustOK(t, call(t, a2, "run_go_code", map[string]any{"command": "true"}))
	mustRefuse(t, "alice's create with her share full again", call(t, a1, "create_sandbox", map[string]any{}), "--max-sandboxes-per-principal")

	time.Sleep(time.Millisecond) // idle for longer than the reaper's 1ns
	if n := s.Reap(context.Background(), time.Nanosecond); n != 2 {
		t.Fatalf("reaped %d of alice's sessions' sandboxes, want 2", n)
	}
	mustOK(t, call(t, a1, "create_sandbox", map[string]any{}))
	mustOK(t, call(t, a1, "run_go_code", map[string]any{"command": "true"}))
}

// TestStatelessPrincipalShare: on a stateless server the sandboxes that
// calls without sandbox_id make count against their principal's share
// (auto: half of 4); past it alice is refused, bob is not, and
// delete_sandbox gives her a slot back.
func TestStatelessPrincipalShare(t *testing.T) {
	cfg := Defaults()
	cfg.Stateless, cfg.MaxSandboxes, cfg.HTTP.Principals = true, 4, testPrincipals
	s, _ := newTestServer(t, cfg)
	url := httpServer(t, s)
	alice, bob := connectAs(t, url, testPrincipals[0].Token, nil), connectAs(t, url, testPrincipals[1].Token, nil)
	first := runOut(t, mustOK(t, call(t, alice, "run_go_code", map[string]any{"command": "true"}))).SandboxID
	mustOK(t, call(t, alice, "run_go_code", map[string]any{"command": "true"}))
	mustRefuse(t, "alice's third stateless call with a share of 2", call(t, alice, "run_go_code", map[string]any{"command": "true"}),
		`"alice" already holds 2 of the 2`, "--max-sandboxes-per-principal", "pass the sandbox_id")
	mustOK(t, call(t, alice, "run_go_code", map[string]any{"sandbox_id": first, "command": "true"}))
	mustOK(t, call(t, bob, "run_go_code", map[string]any{"command": "true"}))
	mustOK(t, call(t, bob, "create_sandbox", map[string]any{}))
	mustOK(t, call(t, alice, "delete_sandbox", map[string]any{"sandbox_id": first}))
	mustOK(t, call(t, alice, "run_go_code", map[string]any{"command": "true"}))
}

// TestPerPrincipalDefault: the auto share by the number of principals,
// the flag's values, and the combinations Validate refuses.
func TestPerPrincipalDefault(t *testing.T) {
	two := mcphttp.Config{Principals: testPrincipals[:1], Token: "a-single-token-0123456789"}
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"stdio", Config{MaxSandboxes: 16}, 0},
		{"one token", Config{MaxSandboxes: 16, HTTP: mcphttp.Config{Token: "a-single-token-0123456789"}}, 0},
		{"one named principal", Config{MaxSandboxes: 16, HTTP: mcphttp.Config{Principals: testPrincipals[:1]}}, 0},
		{"two named principals", Config{MaxSandboxes: 16, HTTP: mcphttp.Config{Principals: testPrincipals}}, 8},
		{"a named principal and the token", Config{MaxSandboxes: 16, HTTP: two}, 8},
		{"odd total", Config{MaxSandboxes: 5, HTTP: two}, 2},
		{"total of 1", Config{MaxSandboxes: 1, HTTP: two}, 1},
		{"no total", Config{MaxSandboxes: 0, HTTP: two}, autoFallbackShare},
	} {
		c.cfg.MaxSandboxesPerPrincipal = PerPrincipalAuto
		s, _ := newTestServer(t, c.cfg)
		if got := s.cfg.MaxSandboxesPerPrincipal; got != c.want {
			t.Errorf("%s: auto share %d, want %d", c.name, got, c.want)
		}
	}

	set := func(args ...string) (Config, error) {
		cfg := Defaults()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return cfg, err
		}
		return cfg, cfg.Validate()
	}
	if cfg, err := set(); err != nil || cfg.MaxSandboxesPerPrincipal != PerPrincipalAuto {
		t.Errorf("default: %d, %v; want auto", cfg.MaxSandboxesPerPrincipal, err)
	}
	for arg, want := range map[string]int{"auto": PerPrincipalAuto, "0": 0, "3": 3, "16": 16} {
		if cfg, err := set("--max-sandboxes-per-principal=" + arg); err != nil || cfg.MaxSandboxesPerPrincipal != want {
			t.Errorf("--max-sandboxes-per-principal=%s: %d, %v; want %d", arg, cfg.MaxSandboxesPerPrincipal, err, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-sandboxes-per-principal=-1"}, "must not be negative"},
		{[]string{"--max-sandboxes-per-principal=half"}, "want a number or auto"},
		{[]string{"--max-sandboxes-per-principal=17"}, "--max-sandboxes-per-principal=17 is above --max-sandboxes=16"},
		{[]string{"--max-sandboxes=4", "--max-sandboxes-per-principal=5"}, "is above --max-sandboxes=4"},
	} {
		if _, err := set(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if _, err := set("--max-sandboxes=0", "--max-sandboxes-per-principal=40"); err != nil {
		t.Errorf("a share with no total: %v", err)
	}
}
