package server

import (
	"net/http"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/metricfamily"
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

// durationBuckets are the upper bounds, in seconds, of
// sandbox_server_exec_duration_seconds.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// metrics are the runtime server's Prometheus metrics, served at GET
// /metrics on the legacy HTTP port in the Prometheus text format, with
// the Go runtime's and the process's (go_*, process_*). Each Server has
// its own sets (internal/metricfamily says why this library).
// docs/sandbox-server.md lists them with a sample.
type metrics struct {
	commands, duration, inFlight, bytes *metricfamily.Family
	// act, when set, counts each command as activity (idle.go).
	act *activity
	// chg, when set, counts each command as a change of the files
	// (snapshot.go).
	chg *changes
}

func newMetrics() *metrics {
	fam := metricfamily.New
	return &metrics{
		commands: fam("sandbox_server_commands_total",
			"Commands run, by API (legacy: POST /execute; process: the sandboxd ProcessService) and outcome (ok, exit_code, timeout, signal, error).", "counter"),
		duration: fam("sandbox_server_exec_duration_seconds", "Wall time of each command, from start to exit, by API.", "histogram"),
		inFlight: fam("sandbox_server_commands_in_flight", "Commands running now, by API.", "gauge"),
		bytes: fam("sandbox_server_bytes_total",
			"Bytes received (in: HTTP request bodies, process stdin) and sent (out: HTTP response bodies, process stdout+stderr), by API.", "counter"),
	}
}

func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", metricfamily.ContentType)
		for _, f := range []*metricfamily.Family{m.bytes, m.inFlight, m.commands, m.duration} {
			f.Write(w)
		}
		vm.WriteProcessMetrics(w)
	})
}

// started counts a command in flight and returns the func that records its end.
func (m *metrics) started(api string) func(outcome string) {
	start := time.Now()
	var left func()
	if m.act != nil {
		left = m.act.enter()
	}
	if m.chg != nil {
		act, changed := left, m.chg.begin()
		left = func() {
			if act != nil {
				act()
			}
			changed()
		}
	}
	inFlight := m.inFlight.Set.GetOrCreateGauge(m.inFlight.Sample("api", api), nil)
	inFlight.Inc()
	return func(outcome string) {
		if left != nil {
			left()
		}
		inFlight.Dec()
		m.duration.Set.GetOrCreatePrometheusHistogramExt(m.duration.Sample("api", api), durationBuckets).UpdateDuration(start)
		m.commands.Set.GetOrCreateCounter(m.commands.Sample("api", api, "outcome", outcome)).Inc()
	}
}

func (m *metrics) addBytes(api, direction string, n int64) {
	m.bytes.Set.GetOrCreateFloatCounter(m.bytes.Sample("api", api, "direction", direction)).Add(float64(n))
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
		m.addBytes("process", "out", outputBytes)
		_, signalled := wire.ExitSignal(exitCode)
		switch {
		case !exited:
			end(outcomeError)
		case exitCode == 0:
			end(outcomeOK)
		case signalled:
			end(outcomeSignal)
		default:
			end(outcomeExitCode)
		}
	}
}

func (m *metrics) StdinBytes(n int64) { m.addBytes("process", "in", n) }

// httpBytes records one legacy HTTP exchange's body sizes.
func (m *metrics) httpBytes(in, out int64) {
	if in > 0 {
		m.addBytes("legacy", "in", in)
	}
	m.addBytes("legacy", "out", out)
}
