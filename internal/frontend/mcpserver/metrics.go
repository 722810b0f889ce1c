package mcpserver

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/metricfamily"
)

// Tool call outcomes, the "outcome" label of mcp_tool_calls_total.
const (
	callOK        = "ok"         // the tool answered without isError
	callToolError = "tool_error" // isError: a failed build, a timeout, a bad path...
	callError     = "error"      // a protocol error (unknown tool, bad arguments, cancelled)
)

// metrics are the MCP server's Prometheus metrics (mcp-server
// --metrics-addr serves them), with the Go runtime's and the process's
// (go_*, process_*). Each Server has its own sets; the library is the
// runtime server's (internal/metricfamily says why).
type metrics struct {
	calls     *metricfamily.Family // tool, outcome
	callTime  *metricfamily.Family // tool
	openTime  *metricfamily.Family // outcome
	open      *metricfamily.Family
	openCount func() int
	handles   *metricfamily.Family
	calling   *metricfamily.Family
	inFlight  atomic.Int64
}

var latencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// handlesScrapeTimeout bounds the backend's count of handles a scrape
// waits for.
const handlesScrapeTimeout = 5 * time.Second

// newMetrics makes the metrics; open counts the sandboxes the server's
// sessions hold, handles the backend's live handles.
func newMetrics(open func() int, handles func(context.Context) (int, error)) *metrics {
	m := &metrics{
		calls: metricfamily.New("mcp_tool_calls_total",
			"Tool calls, by tool and outcome (ok; tool_error: the result has isError; error: a protocol error).", "counter"),
		callTime: metricfamily.New("mcp_tool_call_duration_seconds",
			"Wall time of each tool call, including a sandbox open it waited for, by tool.", "histogram"),
		openTime: metricfamily.New("mcp_sandbox_open_duration_seconds",
			"Time to open (or attach to) a sandbox, by outcome (ok, error).", "histogram"),
		open:      metricfamily.New("mcp_sandboxes_open", "Sandboxes open (or opening) now.", "gauge"),
		openCount: open,
	}
	m.open.Set.NewGauge(m.open.Name, func() float64 { return float64(m.openCount()) })
	// The replica's load in any mode (with --stateless no sandbox stays
	// open between calls): the metric an HPA scales on (docs/kubernetes.md).
	m.calling = metricfamily.New("mcp_tool_calls_in_flight", "Tool calls being served now.", "gauge")
	m.calling.Set.NewGauge(m.calling.Name, func() float64 { return float64(m.inFlight.Load()) })
	// Counted in the backend at each scrape, so every replica sharing it
	// reports the same number (aggregate with max, not sum); no label
	// names a principal. NaN when the backend does not answer.
	m.handles = metricfamily.New("mcp_handles",
		"Live sandbox handles (create_sandbox) in the backend, of every principal; NaN when the backend could not be asked.", "gauge")
	m.handles.Set.NewGauge(m.handles.Name, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), handlesScrapeTimeout)
		defer cancel()
		n, err := handles(ctx)
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	})
	return m
}

// middleware counts and times tools/call requests.
func (m *metrics) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		tool := call.Params.Name
		if !knownTool(tool) {
			tool = "unknown" // bound the label's values
		}
		start := time.Now()
		m.inFlight.Add(1)
		res, err := next(ctx, method, req)
		m.inFlight.Add(-1)
		m.callTime.Set.GetOrCreatePrometheusHistogramExt(m.callTime.Sample("tool", tool), latencyBuckets).UpdateDuration(start)
		outcome := callOK
		if err != nil {
			outcome = callError
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			outcome = callToolError
		}
		m.calls.Set.GetOrCreateCounter(m.calls.Sample("tool", tool, "outcome", outcome)).Inc()
		return res, err
	}
}

func (m *metrics) opened(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.openTime.Set.GetOrCreatePrometheusHistogramExt(m.openTime.Sample("outcome", outcome), latencyBuckets).Update(d.Seconds())
}

// MetricsHandler serves the server's metrics in the Prometheus text format.
func (s *Server) MetricsHandler() http.Handler {
	m := s.metrics
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", metricfamily.ContentType)
		for _, f := range []*metricfamily.Family{m.calls, m.callTime, m.calling, m.open, m.openTime, m.handles} {
			f.Write(w)
		}
		vm.WriteProcessMetrics(w)
	})
}

// knownTool reports whether name is one of the tools this server has.
func knownTool(name string) bool {
	switch name {
	case "run_go_code", "check_go_code", "read_file", "list_files", "reset_sandbox",
		"create_sandbox", "delete_sandbox", "list_sandboxes",
		"snapshot_sandbox", "fork_sandbox", "restore_sandbox", "list_snapshots", "delete_snapshot":
		return true
	}
	return false
}
