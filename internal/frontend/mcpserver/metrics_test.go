package mcpserver

import (
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func scrape(t *testing.T, s *Server, name, labels string) float64 {
	t.Helper()
	v, _ := scrapeOK(t, s, name+labels)
	return v
}

// scrapeOK returns the value of the series named sample (name and
// labels) and whether the scrape had it.
func scrapeOK(t *testing.T, s *Server, sample string) (float64, bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestMetricsCountToolCalls(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	if v := scrape(t, s, "mcp_sandboxes_open", ""); v != 0 {
		t.Fatalf("sandboxes open before any call = %v", v)
	}
	call(t, cs, "run_go_code", map[string]any{"command": "echo hi"})
	call(t, cs, "run_go_code", map[string]any{"command": "exit 3"})
	call(t, cs, "read_file", map[string]any{"path": "missing.txt"})
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("an unknown tool was accepted")
	}
	for labels, want := range map[string]float64{
		`{outcome="ok",tool="run_go_code"}`:         1,
		`{outcome="tool_error",tool="run_go_code"}`: 1,
		`{outcome="tool_error",tool="read_file"}`:   1,
		`{outcome="error",tool="unknown"}`:          1,
	} {
		if v := scrape(t, s, "mcp_tool_calls_total", labels); v != want {
			t.Errorf("mcp_tool_calls_total%s = %v, want %v", labels, v, want)
		}
	}
	if v := scrape(t, s, "mcp_tool_call_duration_seconds_count", `{tool="run_go_code"}`); v != 2 {
		t.Errorf("run_go_code duration count = %v, want 2", v)
	}
	if v := scrape(t, s, "mcp_sandboxes_open", ""); v != 1 {
		t.Errorf("sandboxes open = %v, want 1", v)
	}
	if v := scrape(t, s, "mcp_sandbox_open_duration_seconds_count", `{outcome="ok"}`); v != 1 {
		t.Errorf("opens = %v, want 1", v)
	}
}

// Every tool the server lists has a label of its own in the metrics (not
// "unknown").
func TestEveryToolIsKnownToMetrics(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if !knownTool(tl.Name) {
			t.Errorf("tool %s is counted as \"unknown\" in mcp_tool_calls_total", tl.Name)
		}
	}
}

// mcp_tool_calls_in_flight counts the calls being served, the load an
// HPA scales on; it goes back to 0 when they end, errors included.
func TestMetricsCallsInFlight(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	h := s.metrics.middleware(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		entered <- struct{}{}
		<-release
		return nil, context.Canceled
	})
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "run_go_code"}}
	done := make(chan struct{}, 2)
	for range 2 {
		go func() { _, _ = h(context.Background(), "tools/call", req); done <- struct{}{} }()
	}
	<-entered
	<-entered
	if v := scrape(t, s, "mcp_tool_calls_in_flight", ""); v != 2 {
		t.Errorf("in flight during two calls = %v, want 2", v)
	}
	close(release)
	<-done
	<-done
	if v := scrape(t, s, "mcp_tool_calls_in_flight", ""); v != 0 {
		t.Errorf("in flight after the calls = %v, want 0", v)
	}
}
