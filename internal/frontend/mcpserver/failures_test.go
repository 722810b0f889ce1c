package mcpserver

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// lockedBuffer is a bytes.Buffer safe for the log's writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFailedCallsLogBounded: one client making 300 failing tool calls
// over Streamable HTTP (run_go_code and check_go_code on a sandbox_id it
// has no handle of) makes the server log ratelog.OutsideBurst lines and,
// when it stops, one summary counting the rest. Before, each failure
// wrote a WARN line of its own: 300 calls in 4 s wrote 129 KB. The
// interval is the production one (a minute): the test counts, it does not
// wait for the interval to end.
func TestFailedCallsLogBounded(t *testing.T) {
	const calls = 300
	logs := &lockedBuffer{}
	s, err := New(Config{Backend: goruntimetest.New(t.TempDir()), MaxTTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.ServeHTTP(ctx, ln) }()
	cs := connectHTTP(t, "http://"+ln.Addr().String()+"/mcp")
	missing := strings.Repeat("ab", 16) // a well-formed handle ID no one has
	for i := range calls {
		tool, args := "run_go_code", map[string]any{"sandbox_id": missing, "command": "go run ."}
		if i%3 == 0 {
			tool, args = "check_go_code", map[string]any{"sandbox_id": missing}
		}
		if res := call(t, cs, tool, args); !res.IsError || !strings.Contains(text(res), "not found") {
			t.Fatalf("call %d (%s) on a missing sandbox_id: %s", i, tool, text(res))
		}
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}

	out := logs.String()
	failed := strings.Count(out, `msg="tool call failed"`)
	summaries := regexp.MustCompile(`msg="tool call failed \(rate-limited\)".* suppressed=(\d+)`).FindAllStringSubmatch(out, -1)
	if failed != ratelog.OutsideBurst {
		t.Errorf("%d failed calls logged %d lines; want %d", calls, failed, ratelog.OutsideBurst)
	}
	if len(summaries) != 1 || summaries[0][1] != "290" {
		t.Errorf("summary lines %q; want one counting the other %d", summaries, calls-ratelog.OutsideBurst)
	}
	if lines := strings.Count(out, "\n"); len(out) > 16<<10 {
		t.Errorf("%d failed calls wrote %d bytes in %d lines of log; want at most 16 KiB", calls, len(out), lines)
	}
	t.Logf("%d failed calls: %d bytes of log, %d lines", calls, len(out), strings.Count(out, "\n"))
}
