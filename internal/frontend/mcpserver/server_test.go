package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// These tests drive the server through the real MCP SDK client, over the
// SDK's in-memory transport (as stdio) and over real Streamable HTTP, with
// goruntimetest.Backend standing in for a sandbox backend. cmd/mcp-server's tests
// run the built binary against the real local backend.

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newTestServer(t *testing.T, cfg Config) (*Server, *goruntimetest.Backend) {
	t.Helper()
	hb, _ := cfg.Backend.(*goruntimetest.Backend)
	if cfg.Backend == nil {
		hb = goruntimetest.New(t.TempDir())
		cfg.Backend = hb
	}
	cfg.Logger = testLogger(t)
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, hb
}

// connectMemory connects an SDK client to s over an in-memory pipe, the
// way a stdio client talks to the process.
func connectMemory(t testing.TB, s *Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return cs
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func runOut(t *testing.T, res *mcp.CallToolResult) RunOutput {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatalf("no structuredContent; content: %s", text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out RunOutput
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return out
}

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

func TestReadAndListFiles(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"go.mod": "module m\n", "pkg/util/util.go": "package util\n"},
		"command": "head -c 300000 /dev/zero | tr '\\0' x > big.txt; printf '\\377\\376' > bin.dat",
	})
	res := call(t, cs, "read_file", map[string]any{"path": "/app/pkg/util/util.go"})
	if res.IsError || text(res) != "package util\n" {
		t.Fatalf("read_file: %v %q", res.IsError, text(res))
	}
	res = call(t, cs, "read_file", map[string]any{"path": "big.txt"})
	if res.IsError || !strings.Contains(text(res), "read on with offset 262144") || len(text(res)) > maxReadBytes+200 {
		t.Fatalf("big read_file: isError=%v len=%d", res.IsError, len(text(res)))
	}
	res = call(t, cs, "read_file", map[string]any{"path": "bin.dat"})
	if res.IsError || !strings.Contains(text(res), "binary") {
		t.Fatalf("binary read_file: %q", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{})
	if res.IsError || !strings.Contains(text(res), "go.mod  9 bytes") || !strings.Contains(text(res), "pkg/") || strings.Contains(text(res), "util.go") {
		t.Fatalf("list_files:\n%s", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{"recursive": true})
	if res.IsError || !strings.Contains(text(res), "pkg/util/util.go  13 bytes") {
		t.Fatalf("recursive list_files:\n%s", text(res))
	}
}

// readOut decodes read_file's structured result.
func readOut(t *testing.T, res *mcp.CallToolResult) ReadOutput {
	t.Helper()
	if res.IsError || res.StructuredContent == nil {
		t.Fatalf("read_file failed: %s", text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out ReadOutput
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return out
}

// TestReadFileIsBounded: a file far larger than read_file's limit is never
// loaded whole into the server (before, a 1 GB sparse file cost ~2 GB of
// RSS), and its NUL bytes make it binary, not text.
func TestReadFileIsBounded(t *testing.T) {
	s, b := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "truncate -s 64M sparse && head -c 1000000 /dev/zero | tr '\\0' y > text"}))
	res := call(t, cs, "read_file", map[string]any{"path": "sparse"})
	if got := b.Sandbox(out.SandboxID).LargestRead(); got > maxReadBytes {
		t.Errorf("read_file of a 64 MiB file downloaded %d bytes whole; want at most %d", got, maxReadBytes)
	}
	ro := readOut(t, res)
	if !ro.Binary || ro.Content != "" || ro.Size != 64<<20 || !strings.Contains(text(res), "binary") {
		t.Errorf("sparse file: binary=%v size=%d content %d bytes, text %q; want binary, size %d, no content", ro.Binary, ro.Size, len(ro.Content), clip.String(text(res), 200), 64<<20)
	}
	// A large text file reads whole in parts.
	var got strings.Builder
	for off := int64(0); ; {
		ro := readOut(t, call(t, cs, "read_file", map[string]any{"path": "text", "offset": off}))
		if ro.Offset != off || ro.Size != 1000000 || ro.Length != len(ro.Content) || ro.Length > maxReadBytes {
			t.Fatalf("part at %d: offset %d size %d length %d (content %d bytes)", off, ro.Offset, ro.Size, ro.Length, len(ro.Content))
		}
		got.WriteString(ro.Content)
		off += int64(ro.Length)
		if !ro.Truncated {
			break
		}
	}
	if got.String() != strings.Repeat("y", 1000000) {
		t.Errorf("parts joined = %d bytes, want the file's 1000000 'y'", got.Len())
	}
	if got := b.Sandbox(out.SandboxID).LargestRead(); got > maxReadBytes {
		t.Errorf("reading in parts downloaded %d bytes whole; want at most %d", got, maxReadBytes)
	}
}

func TestReadFileRanges(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"digits.txt": "0123456789", "it's here/a b.txt": "quoted", "nul.txt": "ab\x00cd"},
		"command": "mkdir -p sub && printf 'h\\303\\251llo' > utf8.txt", // hé llo: é is 2 bytes
	})
	ro := readOut(t, call(t, cs, "read_file", map[string]any{"path": "digits.txt", "offset": 5, "max_bytes": 3}))
	if ro.Content != "567" || ro.Offset != 5 || ro.Length != 3 || ro.Size != 10 || !ro.Truncated {
		t.Errorf("digits 5+3 = %+v, want 567 at 5, length 3, size 10, truncated", ro)
	}
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "digits.txt", "offset": 8}))
	if ro.Content != "89" || ro.Truncated {
		t.Errorf("digits from 8 = %+v, want 89, not truncated", ro)
	}
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "it's here/a b.txt", "offset": 1}))
	if ro.Content != "uoted" {
		t.Errorf("quoted name from 1 = %+v, want uoted", ro)
	}
	// A range starting inside a UTF-8 sequence skips its rest.
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "utf8.txt", "offset": 2}))
	if ro.Content != "llo" || ro.Offset != 3 {
		t.Errorf("utf8 from 2 = %+v, want llo at 3", ro)
	}
	// NUL bytes are binary even though they are valid UTF-8.
	if ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "nul.txt"})); !ro.Binary || ro.Content != "" {
		t.Errorf("nul.txt = %+v, want binary", ro)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "digits.txt", "offset": 11}, "past the end"},
		{map[string]any{"path": "digits.txt", "offset": -1}, "offset -1"},
		{map[string]any{"path": "digits.txt", "max_bytes": maxReadBytes + 1}, "max_bytes"},
		{map[string]any{"path": "sub"}, "is a directory; use list_files"},
		{map[string]any{"path": "nope/x"}, "no such file"},
	} {
		res := call(t, cs, "read_file", c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("read_file %v: isError=%v %q, want an error containing %q", c.args, res.IsError, text(res), c.want)
		}
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

func TestResetKeepsSessionEmptiesApp(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "reset_sandbox", nil)
	if res.IsError || !strings.Contains(text(res), "nothing to reset") || hb.Opened() != 0 {
		t.Fatalf("reset before any sandbox: %q (opened %d)", text(res), hb.Opened())
	}
	call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"a/b.txt": "x"}, "command": "true"})
	res = call(t, cs, "reset_sandbox", nil)
	if res.IsError {
		t.Fatalf("reset: %s", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{})
	if !strings.Contains(text(res), "is empty") {
		t.Fatalf("after reset: %s", text(res))
	}
}

func TestEphemeralWipesBetweenCalls(t *testing.T) {
	s, _ := newTestServer(t, Config{Ephemeral: true})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"a.txt": "x"}, "command": "cat a.txt"})
	res := call(t, cs, "run_go_code", map[string]any{"command": "ls"})
	if out := runOut(t, res); out.Stdout != "" {
		t.Fatalf("--ephemeral: second call sees %q", out.Stdout)
	}
}

func TestTimeoutIsReported(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "run_go_code", map[string]any{"command": "echo before; sleep 10", "timeout_seconds": 0.5})
	out := runOut(t, res)
	if !res.IsError || !out.TimedOut || out.Outcome != "timeout" || out.ExitCode != 124 || out.Stdout != "before\n" {
		t.Fatalf("timeout: isError=%v %+v", res.IsError, out)
	}
	if !strings.HasPrefix(text(res), "timeout: killed after 0.5s") {
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
	// The next call gets the session's turn right away and, past the
	// command's end, finds no trace of its last step.
	start := time.Now()
	res := call(t, cs, "run_go_code", map[string]any{"command": "sleep 2.5; ls"})
	if out := runOut(t, res); strings.Contains(out.Stdout, "finished") || !strings.Contains(out.Stdout, "started") {
		t.Fatalf("cancelled command kept running: ls = %q", out.Stdout)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("next call waited %s", d)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(20 * time.Millisecond)
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

func TestDeadSandboxIsReplaced(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "true"}))
	hb.Sandbox(out.SandboxID).Kill()
	res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "sandbox is gone") || !strings.Contains(text(res), "next call starts a new") {
		t.Fatalf("call in a dead sandbox: %q", text(res))
	}
	res = call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if res.IsError || runOut(t, res).SandboxID == out.SandboxID || hb.Opened() != 2 {
		t.Fatalf("call after the sandbox died: %q (opened %d)", text(res), hb.Opened())
	}
}

// stuckBackend fails or hangs in Open.
type stuckBackend struct {
	goruntimetest.Backend
	err error // returned by Open; nil means block until ctx is done
}

func (b *stuckBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	if b.err != nil {
		return nil, b.err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestOpenFailuresAreExplained(t *testing.T) {
	unavailable := &stuckBackend{err: fmt.Errorf("local backend: bubblewrap (bwrap) not found: run scripts/install-deps.sh: %w", goruntime.ErrUnavailable)}
	s, _ := newTestServer(t, Config{Backend: unavailable})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "backend is unavailable") || !strings.Contains(text(res), "install-deps.sh") {
		t.Fatalf("unavailable backend: %q", text(res))
	}

	s2, _ := newTestServer(t, Config{Backend: &stuckBackend{}, OpenTimeout: 100 * time.Millisecond})
	cs2 := connectMemory(t, s2, nil)
	res = call(t, cs2, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "open timeout, 100ms") {
		t.Fatalf("slow open: %q", text(res))
	}
	if s2.OpenSandboxes() != 0 {
		t.Fatalf("a failed open is counted as an open sandbox")
	}
}

func TestClaimAndPersistent(t *testing.T) {
	hb := goruntimetest.New(t.TempDir())
	sb, err := hb.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.(*goruntimetest.Sandbox).Dir(), "kept.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, Config{Backend: hb, Claim: sb.ID(), Persistent: true})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "read_file", map[string]any{"path": "kept.txt"})
	if res.IsError || text(res) != "still here" {
		t.Fatalf("claimed sandbox: %q", text(res))
	}
	cs.Close()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hb.Closed() != 0 || hb.Live() != 1 {
		t.Fatalf("--persistent closed the sandbox (closed=%d live=%d)", hb.Closed(), hb.Live())
	}

	s2, _ := newTestServer(t, Config{Backend: hb, Claim: "no-such-sandbox"})
	cs2 := connectMemory(t, s2, nil)
	res = call(t, cs2, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "sandbox not found") {
		t.Fatalf("bad --claim: %q", text(res))
	}
}

// TestBadClaimFailsAtStart: ServeStdio with a claim that names no sandbox
// returns an error at once instead of serving calls that all fail.
func TestBadClaimFailsAtStart(t *testing.T) {
	s, _ := newTestServer(t, Config{Claim: "no-such-sandbox"})
	inR, inW := io.Pipe() // the client never writes
	defer inW.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW) }()
	select {
	case err := <-done:
		if !errors.Is(err, goruntime.ErrSandboxNotFound) || !strings.Contains(err.Error(), "no-such-sandbox") || strings.Count(err.Error(), "--claim") != 1 {
			t.Fatalf("ServeStdio with a bad claim = %v; want an error naming --claim once and the ID, wrapping ErrSandboxNotFound", err)
		}
	case <-time.After(10 * time.Second):
		inW.Close() // end the serve loop so the test can finish
		t.Fatal("ServeStdio with a claim naming no sandbox started serving; want an error at once")
	}
}

func TestHandlerRefusesStdioOnlyOptions(t *testing.T) {
	for _, cfg := range []Config{{Claim: "x"}, {Persistent: true}} {
		s, _ := newTestServer(t, cfg)
		if _, err := s.Handler(); err == nil || !strings.Contains(err.Error(), "stdio only") {
			t.Errorf("%+v: Handler error = %v", cfg, err)
		}
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Backend") {
		t.Errorf("New without a backend: %v", err)
	}
	if _, err := New(Config{Backend: goruntimetest.New(t.TempDir()), DefaultTimeout: time.Minute, MaxTimeout: time.Second}); err == nil {
		t.Error("New accepted a max timeout below the default")
	}
}

// httpServer serves s over real Streamable HTTP on a loopback port.
func httpServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeHTTP(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

func connectHTTP(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestHTTPSessionsAreIsolated(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	url := httpServer(t, s)
	a, b := connectHTTP(t, url), connectHTTP(t, url)
	if v := a.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		t.Fatalf("negotiated session-less protocol %s", v)
	}
	call(t, a, "run_go_code", map[string]any{"files": map[string]any{"secret.txt": "a's"}, "command": "true"})
	call(t, b, "run_go_code", map[string]any{"files": map[string]any{"other.txt": "b's"}, "command": "true"})
	if res := call(t, b, "read_file", map[string]any{"path": "secret.txt"}); !res.IsError {
		t.Fatalf("session b read a's file: %s", text(res))
	}
	res := call(t, a, "list_files", map[string]any{})
	if !strings.Contains(text(res), "secret.txt") || strings.Contains(text(res), "other.txt") {
		t.Fatalf("a's files: %s", text(res))
	}
	if n := s.OpenSandboxes(); n != 2 {
		t.Fatalf("%d sandboxes open, want 2", n)
	}
	// Ending a session (DELETE) closes its sandbox.
	a.Close()
	waitFor(t, func() bool { return hb.Closed() == 1 && s.OpenSandboxes() == 1 })
}

func TestHTTPIdleSandboxIsReaped(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	url := httpServer(t, s)
	a := connectHTTP(t, url)
	call(t, a, "run_go_code", map[string]any{"files": map[string]any{"x.txt": "x"}, "command": "true"})
	if n := s.Reap(context.Background(), time.Hour); n != 0 {
		t.Fatalf("reaped %d sandboxes that were not idle", n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := s.Reap(context.Background(), 10*time.Millisecond); n != 1 || hb.Closed() != 1 {
		t.Fatalf("reaped %d (closed %d), want 1", n, hb.Closed())
	}
	res := call(t, a, "run_go_code", map[string]any{"command": "ls"})
	out := runOut(t, res)
	if !out.NewSandbox || out.Stdout != "" || !strings.Contains(text(res), "fresh one") {
		t.Fatalf("call after reaping: %+v\n%s", out, text(res))
	}
	res = call(t, a, "run_go_code", map[string]any{"command": "true"})
	if runOut(t, res).NewSandbox {
		t.Fatal("new_sandbox reported twice")
	}
}

func TestHTTPMaxSandboxes(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxSandboxes: 1})
	url := httpServer(t, s)
	a, b := connectHTTP(t, url), connectHTTP(t, url)
	call(t, a, "run_go_code", map[string]any{"command": "true"})
	res := call(t, b, "run_go_code", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "1 of 1 in use") {
		t.Fatalf("second sandbox over the limit: %q", text(res))
	}
	a.Close()
	waitFor(t, func() bool { return s.OpenSandboxes() == 0 })
	if res := call(t, b, "run_go_code", map[string]any{"command": "true"}); res.IsError {
		t.Fatalf("after a's session ended: %s", text(res))
	}
}

func TestServeStdioEndsSandbox(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), cr, cw) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, "run_go_code", map[string]any{"command": "true"})
	cs.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if hb.Closed() != 1 || hb.Live() != 0 {
		t.Fatalf("sandbox not closed when the client hung up (closed=%d)", hb.Closed())
	}
}
