package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// TestWaitNoteWithoutProgressToken: a client that sent no progress token
// gets no notification, so the result of a call whose open reported what
// it waited for (the seed build, as the local backend's open on a new
// machine does) says it in a line; a call whose sandbox only started, and
// a client that got the progress as notifications, get no such line.
func TestWaitNoteWithoutProgressToken(t *testing.T) {
	sb := &slowBackend{Backend: goruntimetest.New(t.TempDir()), steps: 2, every: 50 * time.Millisecond}
	s, _ := newTestServer(t, Config{Backend: sb, ProgressInterval: 20 * time.Millisecond})
	cs := connectMemory(t, s, nil)
	first := text(call(t, cs, "run_go_code", map[string]any{"command": "echo hi"}))
	if !strings.HasPrefix(first, "note: while this call waited: seed build cache") || !strings.Contains(first, "2/2") {
		t.Errorf("the first call's result, its open having reported the seed build: want a first line saying so, got:\n%s", first)
	}
	again := text(call(t, cs, "run_go_code", map[string]any{"command": "echo hi"}))
	if strings.Contains(again, "while this call waited") {
		t.Errorf("a call in the open sandbox says it waited:\n%s", again)
	}

	plain, _ := newTestServer(t, Config{})
	if got := text(call(t, connectMemory(t, plain, nil), "run_go_code", map[string]any{"command": "echo hi"})); strings.Contains(got, "while this call waited") {
		t.Errorf("a call whose sandbox only started says it waited:\n%s", got)
	}

	s2, _ := newTestServer(t, Config{Backend: &slowBackend{Backend: goruntimetest.New(t.TempDir()), steps: 2, every: 50 * time.Millisecond}, ProgressInterval: 20 * time.Millisecond})
	opts, msgs := progressClient()
	res := progressCall(t, connectMemory(t, s2, opts))
	if len(msgs()) == 0 {
		t.Fatal("the client with a progress token got no notification")
	}
	if got := text(res); strings.Contains(got, "while this call waited") {
		t.Errorf("a client that got notifications also gets the line:\n%s", got)
	}
}
