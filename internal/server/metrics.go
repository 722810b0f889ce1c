package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// Command outcomes, the "outcome" label of sandbox_server_commands_total.
const (
	outcomeOK       = "ok"        // exit 0
	outcomeExitCode = "exit_code" // exited non-zero
	outcomeTimeout  = "timeout"   // killed by the server's deadline (legacy API)
	outcomeSignal   = "signal"    // killed by a signal (128+N)
	outcomeError    = "error"     // could not start, or the call broke off
)

// metrics are the runtime server's Prometheus metrics, served at GET
// /metrics on the legacy HTTP port. Each Server has its own registry.
// docs/sandbox-server.md lists them with a sample.
type metrics struct {
	reg      *prometheus.Registry
	commands *prometheus.CounterVec   // api, outcome
	duration *prometheus.HistogramVec // api
	inFlight *prometheus.GaugeVec     // api
	bytes    *prometheus.CounterVec   // api, direction
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_server_commands_total",
			Help: "Commands run, by API (legacy: POST /execute; process: the sandboxd ProcessService) and outcome (ok, exit_code, timeout, signal, error).",
		}, []string{"api", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_server_exec_duration_seconds",
			Help:    "Wall time of each command, from start to exit, by API.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"api"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandbox_server_commands_in_flight",
			Help: "Commands running now, by API.",
		}, []string{"api"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_server_bytes_total",
			Help: "Bytes received (in: HTTP request bodies, process stdin) and sent (out: HTTP response bodies, process stdout+stderr), by API.",
		}, []string{"api", "direction"}),
	}
	m.reg.MustRegister(m.commands, m.duration, m.inFlight, m.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// started counts a command in flight and returns the func that records its end.
func (m *metrics) started(api string) func(outcome string) {
	start := time.Now()
	m.inFlight.WithLabelValues(api).Inc()
	return func(outcome string) {
		m.inFlight.WithLabelValues(api).Dec()
		m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
		m.commands.WithLabelValues(api, outcome).Inc()
	}
}

// legacyOutcome classifies a POST /execute result.
func legacyOutcome(res *wire.ExecuteResponse, err error) string {
	switch {
	case err != nil || res == nil:
		return outcomeError
	case res.TimedOut:
		return outcomeTimeout
	case res.Signal != 0:
		return outcomeSignal
	case res.ExitCode != 0:
		return outcomeExitCode
	}
	return outcomeOK
}

// CommandStarted and StdinBytes make metrics the process API's Observer.
func (m *metrics) CommandStarted() func(exitCode int, exited bool, outputBytes int64) {
	end := m.started("process")
	return func(exitCode int, exited bool, outputBytes int64) {
		m.bytes.WithLabelValues("process", "out").Add(float64(outputBytes))
		switch {
		case !exited:
			end(outcomeError)
		case exitCode == 0:
			end(outcomeOK)
		case exitCode > 128:
			end(outcomeSignal)
		default:
			end(outcomeExitCode)
		}
	}
}

func (m *metrics) StdinBytes(n int64) { m.bytes.WithLabelValues("process", "in").Add(float64(n)) }

// httpBytes records one legacy HTTP exchange's body sizes.
func (m *metrics) httpBytes(in, out int64) {
	if in > 0 {
		m.bytes.WithLabelValues("legacy", "in").Add(float64(in))
	}
	m.bytes.WithLabelValues("legacy", "out").Add(float64(out))
}
