package mcpserver

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// slowBackend is a goruntimetest backend whose Open takes a while and reports its
// progress at each step, as the local backend does while it builds its
// seed build cache.
type slowBackend struct {
	*goruntimetest.Backend
	steps int
	every time.Duration
}

func (b *slowBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	for i := 1; i <= b.steps; i++ {
		goruntime.ReportProgress(ctx, goruntime.Progress{Stage: "seed build cache", Message: "compiling", Step: i, Steps: b.steps})
		select {
		case <-time.After(b.every):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Backend.Open(ctx)
}

// serveStdio runs s.ServeStdio over pipes and returns a connected client;
// the test's cleanup hangs up and waits for ServeStdio.
func serveStdio(t *testing.T, s *Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), cr, cw) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts).
		Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

// TestOpenAtStart: with OpenAtStart the stdio sandbox is opened before any
// tool call, and the first call uses it.
func TestOpenAtStart(t *testing.T) {
	s, hb := newTestServer(t, Config{OpenAtStart: true})
	cs := serveStdio(t, s, nil)
	waitFor(t, func() bool { return hb.Opened() == 1 && s.OpenSandboxes() == 1 })
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "echo hi"}))
	if out.Stdout != "hi\n" || out.SandboxID != "sb1" {
		t.Errorf("first call: %+v, want it to run in the sandbox opened at startup (sb1)", out)
	}
	if n := hb.Opened(); n != 1 {
		t.Errorf("%d sandboxes opened, want the one opened at startup", n)
	}
}

// progressClient returns client options that collect progress
// notification messages.
func progressClient() (*mcp.ClientOptions, func() []string) {
	var mu sync.Mutex
	var msgs []string
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
	}}
	return opts, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

func progressCall(t *testing.T, cs *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "true"}}
	params.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("run_go_code: %v %+v", err, res)
	}
	return res
}

func hasStep(msgs []string, step string) bool {
	for _, m := range msgs {
		if strings.Contains(m, "seed build cache: compiling (step "+step) {
			return true
		}
	}
	return false
}

// TestOpenProgressNotifications: a call that opens the sandbox passes the
// backend's progress on as MCP progress notifications.
func TestOpenProgressNotifications(t *testing.T) {
	sb := &slowBackend{Backend: goruntimetest.New(t.TempDir()), steps: 3, every: 300 * time.Millisecond}
	s, _ := newTestServer(t, Config{Backend: sb, ProgressInterval: 50 * time.Millisecond})
	opts, msgs := progressClient()
	cs := connectMemory(t, s, opts)
	progressCall(t, cs)
	got := msgs()
	for _, step := range []string{"1/3", "3/3"} {
		if !hasStep(got, step) {
			t.Errorf("no notification for step %s of the open; got %q", step, got)
		}
	}
}

// TestOpenAtStartProgressToWaitingCall: a first call that arrives while
// the startup open runs waits for it and gets its progress.
func TestOpenAtStartProgressToWaitingCall(t *testing.T) {
	sb := &slowBackend{Backend: goruntimetest.New(t.TempDir()), steps: 3, every: 300 * time.Millisecond}
	s, _ := newTestServer(t, Config{Backend: sb, OpenAtStart: true, ProgressInterval: 50 * time.Millisecond})
	opts, msgs := progressClient()
	cs := serveStdio(t, s, opts)
	progressCall(t, cs)
	got := msgs()
	if !hasStep(got, "3/3") {
		t.Errorf("the waiting call got no notification of the startup open's progress; got %q", got)
	}
	if n := sb.Opened(); n != 1 {
		t.Errorf("%d sandboxes opened, want 1", n)
	}
}
