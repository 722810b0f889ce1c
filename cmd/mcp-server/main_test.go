package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// These tests build the mcp-server binary once and drive it the way MCP
// clients do, with the official SDK client: over stdio (the client spawns
// the binary) and over Streamable HTTP, against the real local backend
// (bubblewrap). The binary has no sandbox-server next to it, so the local
// backend re-executes it as the runtime server inside bubblewrap.

// serverBin is the built binary, set by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	// The benchmark opens local sandboxes in process: the backend
	// re-executes this test binary as the runtime server.
	local.ServeIfChild()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcp-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin = filepath.Join(dir, "mcp-server")
	out, err := exec.Command("go", "build", "-o", serverBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build mcp-server: %v\n%s", err, out)
		return 1
	}
	prepareSeed()
	return m.Run()
}

// prepareSeed builds the seed build cache before any test runs: a fresh
// machine's build takes minutes (more beside other packages' tests), and
// would otherwise count against the first scenario's deadline. A backend
// that cannot start here leaves it to the tests, which then fail with
// the reason. Both state directories the tests use get one: the default
// (servers started without --state-dir) and $LOCAL_TEST_STATE_DIR (the
// handle tests', shared with other packages under make unit).
func prepareSeed() {
	for _, dir := range []string{"", os.Getenv("LOCAL_TEST_STATE_DIR")} {
		b, err := local.New(local.Options{StateDir: dir, Relax: localtest.Here()})
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		if err := b.Prepare(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "prepare the seed build cache:", err)
		}
		cancel()
		_ = b.Close(context.Background())
		if os.Getenv("LOCAL_TEST_STATE_DIR") == "" {
			return
		}
	}
}

// serverArgs are args after the flags the local backend needs here
// (localtest.Flags: --relax=disk as a user other than root, today).
func serverArgs(tb testing.TB, args ...string) []string {
	return append(localtest.Flags(tb), args...)
}

// requireBwrap fails the test with the fix when bubblewrap is missing.
func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap (bwrap) is not installed: the local backend needs it; run scripts/install-deps.sh")
	}
}

// logSink collects a server's stderr for the test log on failure.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func runScenarios(t *testing.T, target smoke.Target, logs *logSink) {
	for _, sc := range smoke.Scenarios() {
		if sc.HTTPOnly && !target.SharedServer {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if err := sc.Run(ctx, target); err != nil {
				t.Errorf("%s over %s: %v\nserver log:\n%s", sc.Name, target.Name, err, tail(logs.String(), 4000))
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func TestStdio(t *testing.T) {
	requireBwrap(t)
	logs := &logSink{}
	runScenarios(t, smoke.StdioTarget(serverBin, serverArgs(t, "--log-level=debug"), logs), logs)
}

func TestStreamableHTTP(t *testing.T) {
	requireBwrap(t)
	logs := &logSink{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	srv, err := smoke.StartHTTP(context.Background(), serverBin, serverArgs(t, "--log-level=debug", "--metrics-addr="+metricsAddr), logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	runScenarios(t, srv.Target(), logs)
	// The scenarios' tool calls show in --metrics-addr's /metrics.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`mcp_tool_calls_total{outcome="ok",tool="run_go_code"}`, "mcp_sandbox_open_duration_seconds_count", "mcp_sandboxes_open"} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics = %d, missing %s:\n%s", resp.StatusCode, want, tail(string(body), 3000))
		}
	}
	if testing.Verbose() {
		t.Logf("metrics sample:\n%s", body)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, tail(logs.String(), 4000))
	}
	// Every sandbox was closed: when sessions ended or at shutdown.
	opened, closed := strings.Count(logs.String(), "sandbox ready"), strings.Count(logs.String(), "sandbox closed")
	if opened == 0 || opened != closed {
		t.Errorf("%d sandboxes opened, %d closed", opened, closed)
	}
}

// TestStdoutCarriesOnlyProtocol checks that over stdio every line the
// binary writes to stdout is a JSON-RPC frame, logs included at debug
// level going to stderr, and that a message over --max-request-mb gets an
// error with its id while the session and its sandbox's files go on.
func TestStdoutCarriesOnlyProtocol(t *testing.T) {
	requireBwrap(t)
	cmd := exec.Command(serverBin, serverArgs(t, "--log-level=debug", "--max-request-mb=1")...)
	var stderr logSink
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	// exchange writes frames and, when want > 0, reads that many lines,
	// each of which must be a JSON-RPC frame.
	exchange := func(want int, frames ...string) []string {
		t.Helper()
		for _, f := range frames {
			if _, err := io.WriteString(stdin, f+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for len(got) < want && lines.Scan() {
			l := lines.Text()
			if !strings.HasPrefix(l, `{"jsonrpc":"2.0"`) {
				t.Fatalf("stdout line is not a JSON-RPC frame: %q\nstderr:\n%s", l, stderr.String())
			}
			got = append(got, l)
		}
		if len(got) < want {
			t.Fatalf("stdout ended after %d frames: %v\nstderr:\n%s", len(got), lines.Err(), stderr.String())
		}
		return got
	}
	exchange(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	exchange(0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	got := exchange(1, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_go_code","arguments":{"command":"echo hi; echo oops >&2; echo kept > kept.txt"}}}`)
	if !strings.Contains(got[0], `hi\n`) || strings.Contains(got[0], `"isError":true`) {
		t.Fatalf("tools/call response: %s", got[0])
	}
	got = exchange(1, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_go_code","arguments":{"command":"true","files":{"big.txt":"`+
		strings.Repeat("b", 2<<20)+`"}}},"id":3}`)
	if !strings.HasPrefix(got[0], `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,`) || !strings.Contains(got[0], "--max-request-mb") {
		t.Fatalf("oversize tools/call response: %s", got[0])
	}
	got = exchange(1, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_go_code","arguments":{"command":"cat kept.txt; ls"}}}`)
	if !strings.Contains(got[0], `"stdout":"kept\nkept.txt\n"`) {
		t.Fatalf("tools/call after the oversize one: %s", got[0])
	}
	stdin.Close()
	if lines.Scan() {
		t.Fatalf("unexpected stdout after the last response: %q", lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcp-server exit: %v\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "sandbox ready") || !strings.Contains(stderr.String(), "sandbox closed") {
		t.Fatalf("no sandbox logs on stderr:\n%s", stderr.String())
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--http=127.0.0.1:0", "--claim=abc"}, "--claim works over stdio only"},
		{[]string{"--http=127.0.0.1:0", "--persistent"}, "--persistent works over stdio only"},
		{[]string{"--backend=docker"}, `--backend="docker": want "local" or "agent-sandbox"`},
		{[]string{"--timeout=2m", "--max-timeout=1m"}, "--max-timeout=1m0s is below --timeout=2m0s"},
		{[]string{"--open-timeout=0s"}, "--open-timeout=0s: must be positive"},
		{[]string{"--log-level=loud"}, "--log-level"},
		{[]string{"stray"}, "unexpected arguments"},
		{[]string{"--memory-mb=0"}, "--memory-mb=0: must be positive"},
		{[]string{"--stateless"}, "--stateless works over HTTP only"},
		{[]string{"--max-ttl=0s"}, "--max-ttl=0s: must be at least 1s"},
		{[]string{"--max-sandboxes-per-principal=-1"}, "--max-sandboxes-per-principal=-1: must not be negative"},
		{[]string{"--max-sandboxes=4", "--max-sandboxes-per-principal=5"}, "--max-sandboxes-per-principal=5 is above --max-sandboxes=4"},
		{[]string{"--sse-close-after=-1s"}, "--sse-close-after=-1s: must not be negative"},
		{[]string{"--http=127.0.0.1:0", "--auth-tokens-file=/nonexistent/tokens"}, "--auth-tokens-file: read tokens file"},
	}
	for _, c := range cases {
		cmd := exec.Command(serverBin, c.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Stdin = strings.NewReader("")
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: want failure mentioning %q, got err=%v stderr=%q", c.args, c.want, err, stderr.String())
		}
	}
}

// TestConfigExamples checks the client configurations in examples/mcp:
// each is valid JSON with an mcpServers entry, and each stdio entry's
// flags are accepted by the binary.
func TestConfigExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/mcp/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			MCPServers map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
				URL     string   `json:"url"`
				HTTPURL string   `json:"httpUrl"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		srv, ok := cfg.MCPServers["go-sandbox"]
		if !ok {
			t.Errorf("%s: no mcpServers.go-sandbox entry", f)
			continue
		}
		switch {
		case srv.Command != "":
			if srv.Command != "mcp-server" {
				t.Errorf("%s: command %q, want mcp-server", f, srv.Command)
			}
			cmd := exec.Command(serverBin, append(srv.Args, "--version")...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: mcp-server %v: %v\n%s", f, srv.Args, err, out)
			}
		case srv.URL != "" || srv.HTTPURL != "":
			if u := srv.URL + srv.HTTPURL; u != "http://127.0.0.1:8931/mcp" {
				t.Errorf("%s: url %q, want the documented http://127.0.0.1:8931/mcp", f, u)
			}
		default:
			t.Errorf("%s: entry has neither command nor url", f)
		}
	}
}

// TestPersistentThenClaim leaves a stdio sandbox running with --persistent
// and reattaches a second server process to it with --claim.
func TestPersistentThenClaim(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &logSink{}
	first := smoke.StdioTarget(serverBin, serverArgs(t, "--persistent"), logs)
	cs, err := first.Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := smoke.RunGo(ctx, cs, map[string]string{"notes/kept.txt": "from the first server\n"}, "true", 0)
	if err != nil || r.IsError {
		t.Fatalf("first server: %v %+v", err, r)
	}
	id := r.Out.SandboxID
	if err := cs.Close(); err != nil {
		t.Fatalf("close the first server: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "claim="+id) {
		t.Fatalf("the first server did not log the sandbox to claim:\n%s", logs.String())
	}

	second := smoke.StdioTarget(serverBin, serverArgs(t, "--claim="+id), logs)
	cs, err = second.Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	txt, isErr, err := smoke.Tool(ctx, cs, "read_file", map[string]any{"path": "notes/kept.txt"})
	if err != nil || isErr || txt != "from the first server\n" {
		t.Fatalf("second server reading the claimed sandbox: %q isError=%v err=%v\n%s", txt, isErr, err, logs.String())
	}
	// Without --persistent the second server closes the sandbox on exit:
	// a third claim finds nothing.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	// The process exits at once with a clear message instead of serving
	// calls that all fail.
	third := exec.CommandContext(ctx, serverBin, serverArgs(t, "--claim="+id)...)
	stdin, err := third.StdinPipe() // held open: only the failed attach may end the process
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	third.Stderr = &stderr
	err = third.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(stderr.String(), "mcp-server: --claim: ") || !strings.Contains(stderr.String(), "sandbox not found") {
		t.Fatalf("mcp-server --claim of a closed sandbox: %v (want exit 1 before serving)\n%s", err, stderr.String())
	}
}

// TestReadFileEdgeCases drives read_file against the real local backend:
// a named pipe answers at once, an escaping symlink's error names the
// path once, and a range of a large sparse file is read inside the
// sandbox and reported as binary.
func TestReadFileEdgeCases(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &logSink{}
	cs, err := smoke.StdioTarget(serverBin, serverArgs(t), logs).Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := smoke.RunGo(ctx, cs, nil, "mkfifo f && ln -s /etc/passwd pw && ln -s /etc etc && truncate -s 1G sparse && printf 0123456789 > digits", 0)
	if err != nil || r.IsError {
		t.Fatalf("setup: %v %+v\n%s", err, r, logs.String())
	}
	callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
	txt, isErr, err := smoke.Tool(callCtx, cs, "read_file", map[string]any{"path": "f"})
	callCancel()
	if err != nil || !isErr || !strings.Contains(txt, "named pipe") {
		t.Errorf("read_file of a named pipe: %q isError=%v err=%v; want a prompt error naming a named pipe", txt, isErr, err)
	}
	txt, isErr, err = smoke.Tool(ctx, cs, "read_file", map[string]any{"path": "pw"})
	if err != nil || !isErr || strings.Count(txt, "read pw") != 1 || !strings.Contains(txt, "Access denied") {
		t.Errorf("read_file of a symlink out of /app: %q isError=%v err=%v; want Access denied with \"read pw\" once", txt, isErr, err)
	}
	txt, isErr, err = smoke.Tool(ctx, cs, "read_file", map[string]any{"path": "etc/passwd"})
	if err != nil || !isErr || !strings.HasPrefix(txt, "read etc/passwd: ") || !strings.Contains(txt, "Access denied") {
		t.Errorf("read_file through a directory symlink out of /app: %q isError=%v err=%v; want Access denied after \"read etc/passwd: \"", txt, isErr, err)
	}
	txt, isErr, err = smoke.Tool(ctx, cs, "list_files", map[string]any{"path": "etc"})
	if err != nil || !isErr || strings.Count(txt, "list etc") != 1 || !strings.Contains(txt, "Access denied") {
		t.Errorf("list_files of a symlink out of /app: %q isError=%v err=%v; want Access denied with \"list etc\" once", txt, isErr, err)
	}
	txt, isErr, err = smoke.Tool(ctx, cs, "read_file", map[string]any{"path": "sparse", "offset": 500 << 20})
	if err != nil || isErr || !strings.Contains(txt, "binary file (1073741824 bytes") {
		t.Errorf("read_file of a 1 GiB sparse file at 500 MiB: %q isError=%v err=%v; want it named binary", txt, isErr, err)
	}
	txt, isErr, err = smoke.Tool(ctx, cs, "read_file", map[string]any{"path": "digits", "offset": 4, "max_bytes": 3})
	if err != nil || isErr || !strings.HasPrefix(txt, "456\n[... digits is 10 bytes; this is bytes 4-7; read on with offset 7") {
		t.Errorf("read_file digits 4+3: %q isError=%v err=%v", txt, isErr, err)
	}
}
