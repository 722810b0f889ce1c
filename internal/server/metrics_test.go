package server

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// metricValue reads one sample from GET /metrics; 0 when it is absent.
func metricValue(t *testing.T, ts *testServer, name, labels string) float64 {
	t.Helper()
	code, body := ts.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d: %s", code, body)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s%s = %q: %v", name, labels, m[1], err)
	}
	return v
}

func TestMetricsCountCommands(t *testing.T) {
	companion, err := processAPIBinary()
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *Config) { c.ProcessAPIBin = companion })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proc, err := ts.startSandboxd(ctx, "127.0.0.1:0", "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()

	ok := `{api="legacy",outcome="ok"}`
	if v := metricValue(t, ts, "sandbox_server_commands_total", ok); v != 0 {
		t.Fatalf("before any command: legacy ok = %v", v)
	}
	ts.run(t, "echo hello")
	ts.run(t, "exit 3")
	ts.exec(t, map[string]any{"command": "echo partial; sleep 5", "timeout_seconds": 0.2})
	for labels, want := range map[string]float64{
		ok:                                   1,
		`{api="legacy",outcome="exit_code"}`: 1,
		`{api="legacy",outcome="timeout"}`:   1,
	} {
		if v := metricValue(t, ts, "sandbox_server_commands_total", labels); v != want {
			t.Errorf("sandbox_server_commands_total%s = %v, want %v", labels, v, want)
		}
	}
	if v := metricValue(t, ts, "sandbox_server_exec_duration_seconds_count", `{api="legacy"}`); v != 3 {
		t.Errorf("legacy duration count = %v, want 3", v)
	}
	if v := metricValue(t, ts, "sandbox_server_exec_duration_seconds_sum", `{api="legacy"}`); v < 0.2 {
		t.Errorf("legacy duration sum = %v, want at least the 0.2 s timeout", v)
	}
	if v := metricValue(t, ts, "sandbox_server_bytes_total", `{api="legacy",direction="in"}`); v <= 0 {
		t.Errorf("legacy bytes in = %v", v)
	}

	// The process API: a streamed command with stdin, then a signal death.
	// It runs in the companion, which reports each command back.
	conn, err := processclient.Dial(proc.(*processAPIHost).lns[0].ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := processv1.NewProcessServiceClient(conn)
	res, err := processclient.Exec(ctx, client, goruntime.ExecRequest{Command: "cat", Stdin: strings.NewReader("twelve bytes")}, processclient.ExecOptions{}, nil)
	if err != nil || res.Stdout != "twelve bytes" {
		t.Fatalf("Exec cat: %+v %v", res, err)
	}
	if _, err := processclient.Exec(ctx, client, goruntime.ExecRequest{Command: "sleep 5", Timeout: 200 * time.Millisecond}, processclient.ExecOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	// The companion wrote each command's end before its stream ended;
	// the server reads the events a moment later.
	deadline := time.Now().Add(time.Minute)
	for metricValue(t, ts, "sandbox_server_commands_total", `{api="process",outcome="signal"}`) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for labels, want := range map[string]float64{
		`{api="process",outcome="ok"}`:     1,
		`{api="process",outcome="signal"}`: 1,
	} {
		if v := metricValue(t, ts, "sandbox_server_commands_total", labels); v != want {
			t.Errorf("sandbox_server_commands_total%s = %v, want %v", labels, v, want)
		}
	}
	for _, dir := range []string{"in", "out"} {
		if v := metricValue(t, ts, "sandbox_server_bytes_total", `{api="process",direction="`+dir+`"}`); v != 12 {
			t.Errorf("process bytes %s = %v, want 12", dir, v)
		}
	}
	if v := metricValue(t, ts, "sandbox_server_commands_in_flight", `{api="process"}`); v != 0 {
		t.Errorf("in flight after the commands = %v", v)
	}
}
