package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// A session's sandbox: opened, replaced when it dies, claimed or kept
// (stdio), one per HTTP session, reaped when idle, capped, ended.

func TestDeadSandboxIsReplaced(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "true"}))
	hb.Sandbox(out.SandboxID).Kill()
	res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "sandbox is gone") || !strings.Contains(text(res), "next call starts a new") {
		t.Fatalf("call in a dead sandbox: %q", text(res))
	}
	res = call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if res.IsError || runOut(t, res).SandboxID == out.SandboxID || hb.Opened() != 2 {
		t.Fatalf("call after the sandbox died: %q (opened %d)", text(res), hb.Opened())
	}
}

// stuckBackend fails or hangs in Open.
type stuckBackend struct {
	goruntimetest.Backend
	err error // returned by Open; nil means block until ctx is done
}

func (b *stuckBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	if b.err != nil {
		return nil, b.err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestOpenFailuresAreExplained(t *testing.T) {
	unavailable := &stuckBackend{err: fmt.Errorf("local backend: bubblewrap (bwrap) not found: run scripts/install-deps.sh: %w", goruntime.ErrUnavailable)}
	s, _ := newTestServer(t, Config{Backend: unavailable})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "backend is unavailable") || !strings.Contains(text(res), "install-deps.sh") {
		t.Fatalf("unavailable backend: %q", text(res))
	}

	s2, _ := newTestServer(t, Config{Backend: &stuckBackend{}, OpenTimeout: 100 * time.Millisecond})
	cs2 := connectMemory(t, s2, nil)
	res = call(t, cs2, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "open timeout, 100ms") {
		t.Fatalf("slow open: %q", text(res))
	}
	if s2.OpenSandboxes() != 0 {
		t.Fatalf("a failed open is counted as an open sandbox")
	}
}

func TestClaimAndPersistent(t *testing.T) {
	hb := goruntimetest.New(t.TempDir())
	sb, err := hb.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.(*goruntimetest.Sandbox).Dir(), "kept.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, Config{Backend: hb, Claim: sb.ID(), Persistent: true})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "read_file", map[string]any{"path": "kept.txt"})
	if res.IsError || text(res) != "still here" {
		t.Fatalf("claimed sandbox: %q", text(res))
	}
	cs.Close()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hb.Closed() != 0 || hb.Live() != 1 {
		t.Fatalf("--persistent closed the sandbox (closed=%d live=%d)", hb.Closed(), hb.Live())
	}

	s2, _ := newTestServer(t, Config{Backend: hb, Claim: "no-such-sandbox"})
	cs2 := connectMemory(t, s2, nil)
	res = call(t, cs2, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "sandbox not found") {
		t.Fatalf("bad --claim: %q", text(res))
	}
}

// TestBadClaimFailsAtStart: ServeStdio with a claim that names no sandbox
// returns an error at once instead of serving calls that all fail.
func TestBadClaimFailsAtStart(t *testing.T) {
	s, _ := newTestServer(t, Config{Claim: "no-such-sandbox"})
	inR, inW := io.Pipe() // the client never writes
	defer inW.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW) }()
	select {
	case err := <-done:
		if !errors.Is(err, goruntime.ErrSandboxNotFound) || !strings.Contains(err.Error(), "no-such-sandbox") || strings.Count(err.Error(), "--claim") != 1 {
			t.Fatalf("ServeStdio with a bad claim = %v; want an error naming --claim once and the ID, wrapping ErrSandboxNotFound", err)
		}
	case <-time.After(10 * time.Second):
		inW.Close() // end the serve loop so the test can finish
		t.Fatal("ServeStdio with a claim naming no sandbox started serving; want an error at once")
	}
}

func TestHandlerRefusesStdioOnlyOptions(t *testing.T) {
	for _, cfg := range []Config{{Claim: "x"}, {Persistent: true}} {
		s, _ := newTestServer(t, cfg)
		if _, err := s.Handler(); err == nil || !strings.Contains(err.Error(), "stdio only") {
			t.Errorf("%+v: Handler error = %v", cfg, err)
		}
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Backend") {
		t.Errorf("New without a backend: %v", err)
	}
	if _, err := New(Config{Backend: goruntimetest.New(t.TempDir()), DefaultTimeout: time.Minute, MaxTimeout: time.Second}); err == nil {
		t.Error("New accepted a max timeout below the default")
	}
}

func TestHTTPSessionsAreIsolated(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	url := httpServer(t, s)
	a, b := connectHTTP(t, url), connectHTTP(t, url)
	if v := a.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		t.Fatalf("negotiated session-less protocol %s", v)
	}
	call(t, a, "run_go_code", map[string]any{"files": map[string]any{"secret.txt": "a's"}, "command": "true"})
	call(t, b, "run_go_code", map[string]any{"files": map[string]any{"other.txt": "b's"}, "command": "true"})
	if res := call(t, b, "read_file", map[string]any{"path": "secret.txt"}); !res.IsError {
		t.Fatalf("session b read a's file: %s", text(res))
	}
	res := call(t, a, "list_files", map[string]any{})
	if !strings.Contains(text(res), "secret.txt") || strings.Contains(text(res), "other.txt") {
		t.Fatalf("a's files: %s", text(res))
	}
	if n := s.OpenSandboxes(); n != 2 {
		t.Fatalf("%d sandboxes open, want 2", n)
	}
	// Ending a session (DELETE) closes its sandbox.
	a.Close()
	waitFor(t, func() bool { return hb.Closed() == 1 && s.OpenSandboxes() == 1 })
}

func TestHTTPIdleSandboxIsReaped(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	url := httpServer(t, s)
	a := connectHTTP(t, url)
	call(t, a, "run_go_code", map[string]any{"files": map[string]any{"x.txt": "x"}, "command": "true"})
	if n := s.Reap(context.Background(), time.Hour); n != 0 {
		t.Fatalf("reaped %d sandboxes that were not idle", n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := s.Reap(context.Background(), 10*time.Millisecond); n != 1 || hb.Closed() != 1 {
		t.Fatalf("reaped %d (closed %d), want 1", n, hb.Closed())
	}
	res := call(t, a, "run_go_code", map[string]any{"command": "ls"})
	out := runOut(t, res)
	if !out.NewSandbox || out.Stdout != "" || !strings.Contains(text(res), "fresh one") {
		t.Fatalf("call after reaping: %+v\n%s", out, text(res))
	}
	res = call(t, a, "run_go_code", map[string]any{"command": "true"})
	if runOut(t, res).NewSandbox {
		t.Fatal("new_sandbox reported twice")
	}
}

func TestHTTPMaxSandboxes(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxSandboxes: 1})
	url := httpServer(t, s)
	a, b := connectHTTP(t, url), connectHTTP(t, url)
	call(t, a, "run_go_code", map[string]any{"command": "true"})
	res := call(t, b, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "1 of 1 in use") {
		t.Fatalf("second sandbox over the limit: %q", text(res))
	}
	a.Close()
	waitFor(t, func() bool { return s.OpenSandboxes() == 0 })
	if res := call(t, b, "run_go_code", map[string]any{"command": "true"}); res.IsError {
		t.Fatalf("after a's session ended: %s", text(res))
	}
}

func TestServeStdioEndsSandbox(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), cr, cw) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, "run_go_code", map[string]any{"command": "true"})
	cs.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if hb.Closed() != 1 || hb.Live() != 0 {
		t.Fatalf("sandbox not closed when the client hung up (closed=%d)", hb.Closed())
	}
}
