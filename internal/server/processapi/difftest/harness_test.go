package difftest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// target is one server under test.
type target struct {
	name string
	root string // sandbox root; replaced by <ROOT> in observations
	grpc processv1.ProcessServiceClient
	http *http.Client
	base string // REST base URL
}

// repoRoot finds the directory of the main module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v (the differential test needs the Go toolchain)", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		t.Fatal("not inside the go-runtime-sandbox module")
	}
	return filepath.Dir(mod)
}

// buildBinaries builds our sandbox-server (with its process API
// companion, sandbox-processapi, next to it: the API is served there) and
// upstream's sandboxd into dir.
func buildBinaries(t *testing.T, dir string) (ours, upstream string) {
	t.Helper()
	repo := repoRoot(t)
	ours = filepath.Join(dir, "sandbox-server")
	run(t, repo, "go", "build", "-o", dir+"/", "./cmd/sandbox-server", "./cmd/sandbox-processapi")
	if bin := os.Getenv("SANDBOXD_UPSTREAM_BIN"); bin != "" {
		return ours, bin
	}
	upstream = filepath.Join(dir, "sandboxd")
	// Upstream's daemon needs controller-runtime, which stays out of the
	// product's go.mod: build it from the e2e tools module, which pins the
	// same agent-sandbox v1.0.3.
	t.Log("building upstream sandboxd v1.0.3 (cold: minutes on 2 cores)")
	run(t, filepath.Join(repo, "test", "e2e", "tools"), "go", "build", "-o", upstream,
		"sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd")
	return ours, upstream
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// fixture lays out the same files in every root.
func fixture(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"sub/deeper", "empty", "full"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"a.txt": "hello\n", "sub/b.txt": "bee", "full/x": "x"}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(root, "link-out")); err != nil {
		t.Fatal(err)
	}
}

// serverEnv is the environment both servers start with.
func serverEnv() []string {
	return append(os.Environ(), "SANDBOX_DIFF_META=visible", "SANDBOX_DIFF_TOKEN=hidden")
}

// startProcess runs a server binary until the test ends; it is stopped with
// SIGTERM and its output is logged when the test fails.
func startProcess(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = serverEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), lastLines(out.String(), 40))
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func dialGRPC(t *testing.T, target string) processv1.ProcessServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return processv1.NewProcessServiceClient(conn)
}

// waitHealthy polls /v1/health until it answers 200, for at most 2 minutes
// (a busy machine is slow to start a server).
func waitHealthy(t *testing.T, tg *target) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := tg.http.Get(tg.base + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /v1/health not ready after 2 minutes: %v", tg.name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startOurs runs cmd/sandbox-server with the sandboxd API on unix sockets
// (as the local backend uses it), orphan reaping on (its default).
func startOurs(t *testing.T, bin, dir string) *target {
	t.Helper()
	root := filepath.Join(dir, "ours-root")
	fixture(t, root)
	grpcSock, restSock := filepath.Join(dir, "ours-grpc.sock"), filepath.Join(dir, "ours-rest.sock")
	startProcess(t, bin,
		"--addr", "unix:"+filepath.Join(dir, "ours-legacy.sock"),
		"--base-dir", root,
		"--home", filepath.Join(dir, "ours-home"),
		"--grpc-addr", "unix:"+grpcSock,
		"--rest-addr", "unix:"+restSock)
	tg := &target{
		name: "ours",
		root: root,
		grpc: dialGRPC(t, "unix:"+grpcSock),
		http: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", restSock)
		}}},
		base: "http://sandboxd",
	}
	waitHealthy(t, tg)
	return tg
}

// startUpstream runs upstream's sandboxd on two free loopback ports.
func startUpstream(t *testing.T, bin, dir string) *target {
	t.Helper()
	root := filepath.Join(dir, "upstream-root")
	fixture(t, root)
	gp, rp := freePort(t), freePort(t)
	startProcess(t, bin, "--grpc-port", strconv.Itoa(gp), "--rest-port", strconv.Itoa(rp), "--root-dir", root)
	tg := &target{
		name: "upstream",
		root: root,
		grpc: dialGRPC(t, fmt.Sprintf("passthrough:///127.0.0.1:%d", gp)),
		http: &http.Client{},
		base: fmt.Sprintf("http://127.0.0.1:%d", rp),
	}
	waitHealthy(t, tg)
	return tg
}

// restCall sends one request and describes the answer: status, content
// type, and the body (JSON canonicalized, volatile fields dropped).
func restCall(t *testing.T, tg *target, method, path string, header http.Header, body io.Reader) string {
	t.Helper()
	req, err := http.NewRequest(method, tg.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := tg.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s %s: %v", tg.name, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s %s: read body: %v", tg.name, method, path, err)
	}
	ct := resp.Header.Get("Content-Type")
	desc := fmt.Sprintf("status=%d type=%q", resp.StatusCode, ct)
	if cl := resp.Header.Get("Content-Length"); cl != "" && method == http.MethodHead {
		desc += " length=" + cl
	}
	if strings.HasPrefix(ct, "application/json") {
		return desc + " json=" + canonicalJSON(t, b)
	}
	return desc + fmt.Sprintf(" body=%q", b)
}

// volatile reports JSON fields whose values differ between runs or
// implementations by design (free-text messages).
func volatile(key string) bool {
	switch key {
	case "uptime_seconds", "modified_at", "message":
		return true
	}
	return false
}

func canonicalJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Sprintf("invalid JSON %q", b)
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if volatile(k) {
					x[k] = "<volatile>"
				} else {
					x[k] = strip(x[k])
				}
			}
			return x
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
			return x
		}
		return v
	}
	out, _ := json.Marshal(strip(v)) // map keys are sorted by encoding/json
	return string(out)
}

// goneWithin polls pid until it is gone, for up to d.
func goneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !procfs.Alive(pid, 0) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
