//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// binary returns a binary run.sh built, failing the test with what to do
// when it is missing.
func binary(t *testing.T, env, what string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run the e2e tests through test/e2e/run.sh, which builds %s", env, what)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (test/e2e/run.sh builds %s)", env, err, what)
	}
	return p
}

// testDemo runs cmd/demo's two flows (single-file smoke and multi-file
// module) with --backend=agent-sandbox.
func testDemo(t *testing.T, rt *runtimeTarget, m connMode) {
	demo := binary(t, "E2E_DEMO", "cmd/demo")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, demo, append(backendArgs(rt, m), "--flow=all")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("demo --flow=all (%s, %s): %v after %v\n%s\npods: %s", rt.name, m.name, err, wall, out.String(), podSummary(rt.ns))
	}
	for _, banner := range []string{"single-file smoke flow", "multi-file module flow"} {
		if !strings.Contains(out.String(), banner) {
			t.Errorf("demo output has no %q section:\n%s", banner, out.String())
		}
	}
	t.Logf("demo wall time (%s, %s, both flows): %v", rt.name, m.name, wall.Round(time.Millisecond))
}

// processScenarios are the MCP smoke scenarios whose outcome depends on
// how the runtime runs processes: a first build, a compile error, a
// command killed at its timeout, a call cancelled mid-run, output over the
// cap. Only these run in the modes other than the full one (see
// fullMCPMode); the rest exercise the client and the router, which the
// full mode covers.
var processScenarios = map[string]bool{
	"single-file":        true,
	"compile-error":      true,
	"timeout":            true,
	"cancellation":       true,
	"huge-output-capped": true,
}

// fullMCPMode reports whether every MCP scenario runs for rt in mode m:
// under runc in the SDK's default (port-forward) mode, or everywhere with
// E2E_FULL=1.
func fullMCPMode(rt *runtimeTarget, m connMode) bool {
	return fullMatrix() || (rt == runcTarget && !m.direct)
}

// testMCP runs cmd/mcp-server with the agent-sandbox backend and drives it
// through the official MCP client: the smoke scenarios over stdio, and
// over Streamable HTTP the ones that need sessions sharing a server.
func testMCP(t *testing.T, rt *runtimeTarget, m connMode) {
	server := binary(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	var logs syncBuffer
	stdio := smoke.StdioTarget(server, backendArgs(rt, m), &logs)
	var http *smoke.HTTPServer // started on first need, stopped when the whole test ends
	defer func() {
		if http != nil {
			_ = http.Stop()
		}
	}()
	for _, sc := range smoke.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if !fullMCPMode(rt, m) && !processScenarios[sc.Name] {
				t.Skipf("client-side scenario: runs under runc in port-forward mode; here too with E2E_FULL=1 (make e2e-full)")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			need := int32(1)
			if sc.HTTPOnly {
				need = 0 // sessions sharing one server: claims at once
			}
			poolReady(ctx, t, rt, need)
			target := stdio
			if sc.HTTPOnly {
				if http == nil {
					var err error
					if http, err = smoke.StartHTTP(ctx, server, backendArgs(rt, m), &logs); err != nil {
						t.Fatalf("start mcp-server --http: %v\nserver log:\n%s", err, logs.String())
					}
				}
				target = http.Target()
			}
			start := time.Now()
			if err := sc.Run(ctx, target); err != nil {
				t.Fatalf("%v\nserver log:\n%s\npods: %s", err, logs.String(), podSummary(rt.ns))
			}
			t.Logf("%s over %s took %v", sc.Name, target.Name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// testUpstreamSDK runs agent-sandbox's own SDK integration tests (v1.0.3,
// clients/go/sandbox, build tag integration) against our warm pool: claim,
// run a command, write/read (also streamed), exists, list, close. They
// assume nothing python-specific, so none is skipped.
func testUpstreamSDK(t *testing.T, rt *runtimeTarget, m connMode) {
	bin := binary(t, "E2E_UPSTREAM_SDK_TEST", "the agent-sandbox SDK's integration test binary")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	args := []string{"-test.run=^TestIntegration", "-test.v", "-test.count=1",
		"-warmpool-name=" + agentsandbox.DefaultWarmPool, "-namespace=" + rt.ns}
	if m.direct {
		args = append(args, "-api-url="+rt.routerURL)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "INTEGRATION_TEST=1", "KUBECONFIG="+shared.c.Kubeconfig, "HOME="+cmd.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil && !onlyIdleConnLeak(string(out)) {
		t.Fatalf("upstream SDK integration tests (%s, %s): %v\n%s\npods: %s", rt.name, m.name, err, out, podSummary(rt.ns))
	}
	if !strings.Contains(string(out), "--- PASS: TestIntegration_FullLifecycle") || strings.Contains(string(out), "--- SKIP") ||
		strings.Contains(string(out), "--- FAIL") {
		t.Fatalf("upstream SDK integration tests did not run and pass:\n%s", out)
	}
	if err != nil {
		t.Logf("upstream SDK integration tests (%s, %s): every test passed; the binary's goleak check then failed on client-go's idle keep-alive connection to the API server only (not a sandbox fault)", rt.name, m.name)
	}
	t.Logf("upstream SDK integration tests (%s, %s):\n%s", rt.name, m.name, out)
}

// onlyIdleConnLeak reports whether the upstream test binary's output
// failed only in its goleak check (goleak.VerifyTestMain in the SDK's
// TestMain), and only on goroutines of idle HTTP connections: client-go
// keeps its transports (and their keep-alive connections to the API server)
// in a process-wide cache that nothing closes, so one is still open when
// goleak looks (in every run here). Any other leaked goroutine, or any
// other failure, is not excused.
var goroutineHeader = regexp.MustCompile(`Goroutine \d+ in state `)

func onlyIdleConnLeak(out string) bool {
	_, leaks, ok := strings.Cut(out, "goleak: Errors on successful test run: found unexpected goroutines:")
	if !ok {
		return false
	}
	blocks := goroutineHeader.Split(leaks, -1)
	if len(blocks) < 2 {
		return false
	}
	for _, b := range blocks[1:] {
		if !strings.Contains(b, "http2.(*ClientConn).readLoop") && !strings.Contains(b, "net/http.(*persistConn).readLoop") &&
			!strings.Contains(b, "net/http.(*persistConn).writeLoop") {
			return false
		}
	}
	return true
}

// TestFirstGoRunLocal times the same first and second `go run` in a local
// (bubblewrap) sandbox, for the comparison with the pods. Like a pod, whose
// image carries the prebuilt standard library, the sandbox starts from the
// backend's seed build cache: it is built (untimed) by Prepare into a state
// directory run.sh keeps in its cache (E2E_LOCAL_STATE_DIR), so only the
// first run of the cache pays for it.
func TestFirstGoRunLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	state := os.Getenv("E2E_LOCAL_STATE_DIR")
	if state == "" {
		state = t.TempDir()
	}
	b, err := local.New(local.Options{StateDir: state, ServerPath: binary(t, "E2E_SANDBOX_SERVER", "cmd/sandbox-server")})
	if err != nil {
		t.Fatalf("local backend: %v", err)
	}
	// Close stops the background work Open starts (the extra seed build)
	// before the state directory can go away.
	defer func() { _ = b.Close(context.Background()) }()
	start := time.Now()
	if err := b.Prepare(ctx); err != nil {
		t.Fatalf("local backend: build the seed build cache: %v", err)
	}
	t.Logf("local backend: seed build cache ready after %v", time.Since(start).Round(time.Millisecond))
	sess, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		t.Fatalf("local Open: %v", err)
	}
	defer sess.Close(context.Background())
	first, second := timeGoRun(ctx, t, sess)
	recordFirstGoRun(t, "local", first, second)
	reportBuildParts(ctx, t, "local", sess.Sandbox())
	reportSyscallCosts(ctx, t, "local", sess.Sandbox())
}
