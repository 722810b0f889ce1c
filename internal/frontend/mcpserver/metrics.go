package mcpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Tool call outcomes, the "outcome" label of mcp_tool_calls_total.
const (
	callOK        = "ok"         // the tool answered without isError
	callToolError = "tool_error" // isError: a failed build, a timeout, a bad path...
	callError     = "error"      // a protocol error (unknown tool, bad arguments, cancelled)
)

// metrics are the MCP server's Prometheus metrics (mcp-server
// --metrics-addr serves them). Each Server has its own registry.
type metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec   // tool, outcome
	callTime  *prometheus.HistogramVec // tool
	openTime  *prometheus.HistogramVec // outcome
	openCount func() int
}

var latencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics(open func() int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_tool_calls_total",
			Help: "Tool calls, by tool and outcome (ok; tool_error: the result has isError; error: a protocol error).",
		}, []string{"tool", "outcome"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_tool_call_duration_seconds",
			Help:    "Wall time of each tool call, including a sandbox open it waited for, by tool.",
			Buckets: latencyBuckets,
		}, []string{"tool"}),
		openTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_sandbox_open_duration_seconds",
			Help:    "Time to open (or attach to) a sandbox, by outcome (ok, error).",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		openCount: open,
	}
	m.reg.MustRegister(m.calls, m.callTime, m.openTime,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcp_sandboxes_open",
			Help: "Sandboxes open (or opening) now.",
		}, func() float64 { return float64(m.openCount()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
		res, err := next(ctx, method, req)
		m.callTime.WithLabelValues(tool).Observe(time.Since(start).Seconds())
		outcome := callOK
		if err != nil {
			outcome = callError
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			outcome = callToolError
		}
		m.calls.WithLabelValues(tool, outcome).Inc()
		return res, err
	}
}

func (m *metrics) opened(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.openTime.WithLabelValues(outcome).Observe(d.Seconds())
}

// MetricsHandler serves the server's metrics in the Prometheus text format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// knownTool reports whether name is one of the tools this server has.
func knownTool(name string) bool {
	switch name {
	case "run_go_code", "read_file", "list_files", "reset_sandbox":
		return true
	}
	return false
}
