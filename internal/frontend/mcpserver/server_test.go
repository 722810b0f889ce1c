package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The run_go_code and check_go_code tools: results, bad input, limits,
// timeouts, output caps, cancellation and progress.

func TestToolsListed(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	for _, name := range []string{"run_go_code", "read_file", "list_files", "reset_sandbox"} {
		if tools[name] == nil {
			t.Fatalf("tool %s missing; have %v", name, tools)
		}
		if tools[name].Annotations == nil {
			t.Errorf("%s has no annotations", name)
		}
	}
	run := tools["run_go_code"]
	if !strings.Contains(run.Description, "/app") || !strings.Contains(run.Description, "go test") {
		t.Errorf("run_go_code description does not teach /app and go test:\n%s", run.Description)
	}
	schema, _ := json.Marshal(run.OutputSchema)
	for _, want := range []string{`"exit_code"`, `"outcome"`, `"build_failed"`, `"stdout_truncated"`, `"duration_ms"`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("output schema lacks %s: %s", want, schema)
		}
	}
	in, _ := json.Marshal(run.InputSchema)
	if !strings.Contains(string(in), `"required":["command"]`) {
		t.Errorf("input schema should require only command: %s", in)
	}
	if !tools["read_file"].Annotations.ReadOnlyHint || !tools["list_files"].Annotations.ReadOnlyHint {
		t.Error("read_file and list_files should be read-only")
	}
	if a := tools["reset_sandbox"].Annotations; a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("reset_sandbox should be destructive: %+v", a)
	}
}

func TestRunPersistsStateAndReportsFailures(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	if hb.Opened() != 0 {
		t.Fatal("sandbox opened before the first call")
	}
	res := call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"dir/a.txt": "hello from a file\n"},
		"command": "cat dir/a.txt; echo to-stderr >&2",
	})
	out := runOut(t, res)
	if res.IsError || out.ExitCode != 0 || out.Outcome != "ok" {
		t.Fatalf("want success, got isError=%v %+v", res.IsError, out)
	}
	if out.Stdout != "hello from a file\n" || out.Stderr != "to-stderr\n" {
		t.Fatalf("streams: %+v", out)
	}
	if txt := text(res); !strings.Contains(txt, "exit code 0") || !strings.Contains(txt, "hello from a file") || !strings.Contains(txt, "to-stderr") {
		t.Fatalf("text block:\n%s", txt)
	}

	// The file persists; a failing command is a tool error with structured content.
	res = call(t, cs, "run_go_code", map[string]any{"command": "cat dir/a.txt && exit 3"})
	out = runOut(t, res)
	if !res.IsError || out.ExitCode != 3 || out.Stdout != "hello from a file\n" {
		t.Fatalf("want isError with exit 3 and the old file, got isError=%v %+v", res.IsError, out)
	}
	if !strings.Contains(text(res), "exit code 3") {
		t.Fatalf("text: %s", text(res))
	}
	if n := hb.Opened(); n != 1 {
		t.Fatalf("opened %d sandboxes, want 1", n)
	}
}

func TestBadInputIsRefusedClearly(t *testing.T) {
	s, hb := newTestServer(t, Config{DefaultTimeout: 10 * time.Second, MaxTimeout: 30 * time.Second})
	cs := connectMemory(t, s, nil)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_go_code", map[string]any{}, "command"},
		{"run_go_code", map[string]any{"command": "  "}, "command is required"},
		{"run_go_code", map[string]any{"command": "true", "timeout_seconds": -1}, "positive"},
		{"run_go_code", map[string]any{"command": "true", "timeout_seconds": 31}, "at most 30s"},
		{"run_go_code", map[string]any{"command": "true", "files": map[string]any{"../x.go": "x"}}, "escapes"},
		{"run_go_code", map[string]any{"command": "true", "files": map[string]any{"/etc/x": "x"}}, "absolute"},
		{"run_go_code", map[string]any{"command": "true", "files": map[string]any{"a": 3}}, "files"},
		{"read_file", map[string]any{}, "path"},
		{"read_file", map[string]any{"path": "../../etc/passwd"}, "escapes"},
		{"read_file", map[string]any{"path": "/etc/passwd"}, "relative to /app"},
		{"read_file", map[string]any{"path": "."}, "list_files"},
		{"read_file", map[string]any{"path": "missing.go"}, "no such file"},
		{"list_files", map[string]any{"path": "nope"}, "no such directory"},
	}
	for _, c := range cases {
		res := call(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("%s %v: want a tool error mentioning %q, got isError=%v %q", c.tool, c.args, c.want, res.IsError, text(res))
		}
	}
	// Refused input loses nothing: the session still works.
	res := call(t, cs, "run_go_code", map[string]any{"command": "echo ok"})
	if res.IsError || runOut(t, res).Stdout != "ok\n" {
		t.Fatalf("after bad input: %s", text(res))
	}
	if n := hb.Opened(); n != 1 {
		t.Fatalf("opened %d sandboxes, want 1", n)
	}
}

// TestLimitOutcomeIsAnError: a command that exits 0 after running into a
// sandbox limit is a failed run (isError), not a success.
func TestLimitOutcomeIsAnError(t *testing.T) {
	s, b := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	first := call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if out := runOut(t, first); first.IsError || out.Outcome != "ok" {
		t.Fatalf("true: isError=%v outcome %s", first.IsError, out.Outcome)
	}
	sb := b.Sandbox(runOut(t, first).SandboxID)
	for _, l := range []goruntime.Limit{goruntime.LimitProcesses, goruntime.LimitFileSize, goruntime.LimitOutput} {
		sb.SetLimit(l)
		res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
		if out := runOut(t, res); !res.IsError || out.ExitCode != 0 || out.Outcome == "ok" {
			t.Errorf("limit %s with exit 0: isError=%v exit %d outcome %s; want isError with the limit's outcome", l, res.IsError, out.ExitCode, out.Outcome)
		}
	}
}

func TestTimeoutIsReported(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	// 5 s: time for a busy machine's shell to print first.
	res := call(t, cs, "run_go_code", map[string]any{"command": "echo before; sleep 30", "timeout_seconds": 5})
	out := runOut(t, res)
	if !res.IsError || !out.TimedOut || out.Outcome != "timeout" || out.ExitCode != 124 || out.Stdout != "before\n" {
		t.Fatalf("timeout: isError=%v %+v", res.IsError, out)
	}
	if !strings.HasPrefix(text(res), "timeout: killed after 5s") {
		t.Fatalf("text: %s", text(res))
	}
}

func TestHugeOutputIsCapped(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "run_go_code", map[string]any{"command": "head -c 10000000 /dev/zero | tr '\\0' y; echo END"})
	out := runOut(t, res)
	if !out.StdoutTruncated || out.StdoutElidedBytes < 9_000_000 || !strings.HasSuffix(out.Stdout, "END\n") {
		t.Fatalf("10 MB of output: truncated=%v elided=%d tail=%q", out.StdoutTruncated, out.StdoutElidedBytes, out.Stdout[max(0, len(out.Stdout)-10):])
	}
	if n := len(text(res)); n > 40<<10 {
		t.Fatalf("text block is %d bytes; want the capped output", n)
	}
	if !strings.Contains(text(res), "bytes left out") {
		t.Fatalf("no truncation mark in text")
	}
}

func TestCancellationKillsCommand(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code",
			Arguments: map[string]any{"command": "touch started; sleep 2; touch finished"}})
		errc <- err
	}()
	waitFor(t, func() bool {
		sb := hb.Sandbox("sb1")
		if sb == nil {
			return false
		}
		_, err := os.Stat(filepath.Join(sb.Dir(), "started"))
		return err == nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	// The next call, past the command's end, finds no trace of its last
	// step: had the command run on, or the call waited for it, finished
	// would be there.
	res := call(t, cs, "run_go_code", map[string]any{"command": "sleep 2.5; ls"})
	if out := runOut(t, res); strings.Contains(out.Stdout, "finished") || !strings.Contains(out.Stdout, "started") {
		t.Fatalf("cancelled command kept running: ls = %q", out.Stdout)
	}
}

func TestProgressWhileRunning(t *testing.T) {
	s, _ := newTestServer(t, Config{ProgressInterval: 100 * time.Millisecond})
	var (
		mu   sync.Mutex
		got  []*mcp.ProgressNotificationParams
		seen atomic.Int32
	)
	cs := connectMemory(t, s, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, r.Params)
			mu.Unlock()
			seen.Add(1)
		},
	})
	params := &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "sleep 1", "timeout_seconds": 5}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 4 {
		t.Fatalf("got %d progress notifications for a 1 s command at 100 ms, want several", len(got))
	}
	last := got[len(got)-1]
	if last.ProgressToken != "tok-1" || last.Total != 5 || last.Progress <= got[0].Progress || !strings.Contains(last.Message, "sleep 1") {
		t.Fatalf("progress: first %+v last %+v", got[0], last)
	}

	// Without a token, none are sent.
	n := seen.Load()
	call(t, cs, "run_go_code", map[string]any{"command": "sleep 0.5"})
	if seen.Load() != n {
		t.Fatal("progress sent without a progress token")
	}
}

func TestCallsInASessionAreSerialized(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			call(t, cs, "run_go_code", map[string]any{"command": "echo start >> log; sleep 0.2; echo end >> log"})
		})
	}
	wg.Wait()
	res := call(t, cs, "read_file", map[string]any{"path": "log"})
	if want := strings.Repeat("start\nend\n", 3); text(res) != want {
		t.Fatalf("calls interleaved:\n%s", text(res))
	}
}
