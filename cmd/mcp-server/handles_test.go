package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
)

// stdioServer starts the binary over stdio and connects an SDK client;
// the process is returned for the test to kill.
func stdioServer(t *testing.T, ctx context.Context, stateDir string, logs *logSink) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(serverBin, serverArgs(t, "--state-dir="+stateDir)...)
	cmd.Stderr = logs
	c := mcp.NewClient(&mcp.Implementation{Name: "handles-test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start mcp-server: %v\n%s", err, logs.String())
	}
	return cs, cmd
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s %v: %s", name, args, text.String())
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

// seededStateDir is the state directory prepareSeed prepared, named, for
// a test that looks into it: $LOCAL_TEST_STATE_DIR, else the default.
func seededStateDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("LOCAL_TEST_STATE_DIR"); dir != "" {
		return dir
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "go-runtime-sandbox")
}

// handleSandbox is what the state directory says of a handle's sandbox:
// where it lives and what it holds on the host.
type handleSandbox struct {
	Dir     string
	PID     int                                `json:"pid"`
	HostUID int                                `json:"host_uid"`
	Cgroup  struct{ Memory, Pids, CPU string } `json:"cgroup"`
	Disk    *struct {
		Image string `json:"image"`
		Dir   string `json:"dir"`
	} `json:"disk"`
}

// findHandleSandbox reads the handle's record (the local backend's layout:
// handles/<first 128 bits of the owner's SHA-256>/<id>.json) and its
// sandbox's sandbox.json.
func findHandleSandbox(t *testing.T, stateDir, owner, id string) handleSandbox {
	t.Helper()
	sum := sha256.Sum256([]byte(owner))
	data, err := os.ReadFile(filepath.Join(stateDir, "handles", hex.EncodeToString(sum[:16]), id+".json"))
	if err != nil {
		t.Fatalf("handle record: %v", err)
	}
	var rec struct{ Sandbox string }
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	hs := handleSandbox{Dir: filepath.Join(stateDir, "sandboxes", rec.Sandbox)}
	data, err = os.ReadFile(filepath.Join(hs.Dir, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &hs); err != nil {
		t.Fatal(err)
	}
	return hs
}

// assertNothingLeft waits (30 s) until a sandbox left nothing on the
// host: its directory, processes, cgroups, host uid lease, disk image and
// mounts.
func assertNothingLeft(t *testing.T, hs handleSandbox) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		if _, err := os.Stat(hs.Dir); err == nil {
			left = append(left, hs.Dir)
		}
		if syscall.Kill(hs.PID, 0) == nil {
			left = append(left, fmt.Sprintf("pid %d", hs.PID))
		}
		for _, cg := range []string{hs.Cgroup.Memory, hs.Cgroup.Pids, hs.Cgroup.CPU} {
			if _, err := os.Stat(cg); cg != "" && err == nil {
				left = append(left, cg)
			}
		}
		if hs.HostUID != 0 {
			if lease, err := os.ReadFile("/run/go-runtime-sandbox/uids/" + strconv.Itoa(hs.HostUID)); err == nil && strings.Contains(string(lease), hs.Dir) {
				left = append(left, "uid lease "+strconv.Itoa(hs.HostUID))
			}
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), filepath.Base(hs.Dir)) {
			left = append(left, "a mount naming "+filepath.Base(hs.Dir))
		}
		if d := hs.Disk; d != nil {
			if _, err := os.Stat(d.Image); d.Image != "" && err == nil {
				left = append(left, "disk image "+d.Image)
			}
			if d.Dir != "" && strings.Contains(string(mounts), " "+d.Dir+" ") {
				left = append(left, "disk mount "+d.Dir)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A sandbox made with create_sandbox outlives an mcp-server killed
// (SIGKILL) during a call on it: a server restarted on the same state
// directory finds its files and built binary by sandbox_id. A handle idle
// past its TTL is reaped, a deleted one leaves nothing behind.
func TestHandleSurvivesKilledServer(t *testing.T) {
	requireBwrap(t)
	stateDir := seededStateDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &logSink{}
	cs, cmd := stdioServer(t, ctx, stateDir, logs)
	id := callTool(t, ctx, cs, "create_sandbox", map[string]any{"ttl_seconds": 300, "labels": map[string]any{"test": "killed"}})["sandbox_id"].(string)
	hs := findHandleSandbox(t, stateDir, "stdio", id)
	out := callTool(t, ctx, cs, "run_go_code", map[string]any{"sandbox_id": id, "command": "go build -o app . && echo built", "timeout_seconds": 600,
		"files": map[string]any{"go.mod": "module kept\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() { println(\"kept binary runs\") }\n", "notes.txt": "kept"}})
	if out["sandbox_id"] != id || !strings.Contains(fmt.Sprint(out["stdout"]), "built") {
		t.Fatalf("build in the handle: %v", out)
	}
	// Kill the server while a call runs in the sandbox.
	running := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"sandbox_id": id, "command": "sleep 20"}})
		running <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-running
	_ = cs.Close()

	cs2, cmd2 := stdioServer(t, ctx, stateDir, logs)
	defer func() { _ = cs2.Close(); _ = cmd2.Wait() }()
	if rd := callTool(t, ctx, cs2, "read_file", map[string]any{"sandbox_id": id, "path": "notes.txt"}); rd["content"] != "kept" {
		t.Fatalf("after the restart, notes.txt: %v\n%s", rd, tail(logs.String(), 3000))
	}
	if run := callTool(t, ctx, cs2, "run_go_code", map[string]any{"sandbox_id": id, "command": "./app"}); !strings.Contains(fmt.Sprint(run["stderr"]), "kept binary runs") {
		t.Fatalf("after the restart, ./app: %v", run)
	}
	list := callTool(t, ctx, cs2, "list_sandboxes", map[string]any{})
	if !strings.Contains(fmt.Sprint(list["sandboxes"]), id) {
		t.Fatalf("list_sandboxes after the restart: %v", list)
	}

	// Idle past its TTL: reaped, nothing left.
	short := callTool(t, ctx, cs2, "create_sandbox", map[string]any{"ttl_seconds": 2})["sandbox_id"].(string)
	shs := findHandleSandbox(t, stateDir, "stdio", short)
	assertNothingLeft(t, shs)
	if l := callTool(t, ctx, cs2, "list_sandboxes", map[string]any{}); strings.Contains(fmt.Sprint(l["sandboxes"]), short) {
		t.Errorf("expired handle still listed: %v", l)
	}

	callTool(t, ctx, cs2, "delete_sandbox", map[string]any{"sandbox_id": id})
	assertNothingLeft(t, hs)
}

// The built server with --stateless on the real local backend: a go-sdk
// client negotiates MCP 2026-07-28, makes a sandbox, builds and runs in
// it by sandbox_id, and a second connection (as another replica would be
// reached) finds the binary there; without sandbox_id, read_file asks
// for one.
func TestStatelessHTTP(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, logs := startLocalHTTP(t, ctx, "--stateless")
	connect := func() *mcp.ClientSession {
		cs, err := srv.Target().Connect(ctx, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, tail(logs.String(), 3000))
		}
		return cs
	}
	cs := connect()
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	id := callTool(t, ctx, cs, "create_sandbox", map[string]any{"ttl_seconds": 120, "labels": map[string]any{"via": "stateless"}})["sandbox_id"].(string)
	run := callTool(t, ctx, cs, "run_go_code", map[string]any{"sandbox_id": id, "files": smoke.HelloFiles(), "command": "go build -o hello main.go && ./hello", "timeout_seconds": 600})
	if run["sandbox_id"] != id || run["exit_code"] != float64(0) {
		t.Fatalf("run_go_code with sandbox_id: %v", run)
	}
	other := connect()
	defer other.Close()
	again := callTool(t, ctx, other, "run_go_code", map[string]any{"sandbox_id": id, "command": "./hello"})
	if again["stdout"] != run["stdout"] || again["stdout"] == "" {
		t.Fatalf("the built binary from another connection: %v (first run: %v)", again, run["stdout"])
	}
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "main.go"}})
	if err != nil || !res.IsError {
		t.Fatalf("read_file without sandbox_id on a stateless server: %v %+v", err, res)
	}
	callTool(t, ctx, other, "delete_sandbox", map[string]any{"sandbox_id": id})
}

// resumeCounter counts the GETs that resume a stream with Last-Event-ID.
type resumeCounter struct{ n atomic.Int32 }

func (c *resumeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A run_go_code call longer than --sse-close-after, on the built binary
// and the local backend: the server closes its stream, the go-sdk client
// resumes it from the event store and gets the result.
func TestLongCallResumesAcrossClosedStream(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, logs := startLocalHTTP(t, ctx, "--sse-close-after=1s")
	rc := &resumeCounter{}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: rc}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, tail(logs.String(), 3000))
	}
	defer cs.Close()
	run := callTool(t, ctx, cs, "run_go_code", map[string]any{"command": "sleep 3; echo finished"})
	if run["stdout"] != "finished\n" || run["exit_code"] != float64(0) {
		t.Fatalf("result across the closed stream: %v", run)
	}
	if rc.n.Load() == 0 {
		t.Fatalf("the client never resumed a stream: --sse-close-after=1s did not close a 3 s call's stream\n%s", tail(logs.String(), 3000))
	}
}

// startLocalHTTP starts the built server over HTTP on the local backend
// (the test state directory when set) with args, and stops it when the
// test ends, failing the test if the stop does.
func startLocalHTTP(t *testing.T, ctx context.Context, args ...string) (*smoke.HTTPServer, *logSink) {
	t.Helper()
	logs := &logSink{}
	if dir := os.Getenv("LOCAL_TEST_STATE_DIR"); dir != "" {
		args = append(args, "--state-dir="+dir)
	}
	srv, err := smoke.StartHTTP(ctx, serverBin, serverArgs(t, args...), logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v\n%s", err, tail(logs.String(), 3000))
		}
	})
	return srv, logs
}
