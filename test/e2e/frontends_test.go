//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// backendArgs are the flags cmd/demo and cmd/mcp-server share for the
// agent-sandbox backend in direct-URL mode through the real router.
func backendArgs() []string {
	return []string{
		"--backend=agent-sandbox",
		"--api-url=" + shared.c.RouterURL,
		"--connectivity=" + agentsandbox.ConnectivityInClusterPodIP,
		"--kubeconfig=" + shared.c.Kubeconfig,
		"--namespace=" + testNS,
		"--warm-pool=" + agentsandbox.DefaultWarmPool,
	}
}

// frontend returns the binary run.sh built for a front end, failing the
// test with what to do when it is missing.
func frontend(t *testing.T, env, what string) string {
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

// TestDemoAgentSandbox runs cmd/demo's two flows (single-file smoke and
// multi-file module) with --backend=agent-sandbox in direct-URL mode
// through the real sandbox-router.
func TestDemoAgentSandbox(t *testing.T) {
	ensureBase(t)
	demo := frontend(t, "E2E_DEMO", "cmd/demo")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)

	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, demo, append(backendArgs(), "--flow=all")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("demo --backend=agent-sandbox --flow=all: %v after %v\n%s\npods: %s", err, wall, out.String(), podSummary(t))
	}
	for _, banner := range []string{"single-file smoke flow", "multi-file module flow"} {
		if !strings.Contains(out.String(), banner) {
			t.Errorf("demo output has no %q section:\n%s", banner, out.String())
		}
	}
	t.Logf("demo wall time (both flows, agent-sandbox via router): %v", wall.Round(time.Millisecond))
	t.Logf("demo output:\n%s", out.String())
}

// TestMCPRunGoCodeAgentSandbox runs cmd/mcp-server with the agent-sandbox
// backend and drives it through the official MCP client: every smoke
// scenario over stdio (one file, build then rerun, a sub-package, a compile
// error, a timeout, cancellation, both streams, huge output, read/list/
// reset), and over Streamable HTTP the one that needs sessions sharing a
// server (two sessions cannot see each other's files).
func TestMCPRunGoCodeAgentSandbox(t *testing.T) {
	ensureBase(t)
	server := frontend(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	var logs syncBuffer
	stdio := smoke.StdioTarget(server, backendArgs(), &logs)
	var http *smoke.HTTPServer // started on first need, stopped when the whole test ends
	defer func() {
		if http != nil {
			_ = http.Stop()
		}
	}()
	for _, sc := range smoke.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)
			target := stdio
			if sc.HTTPOnly {
				if http == nil {
					var err error
					if http, err = smoke.StartHTTP(ctx, server, backendArgs(), &logs); err != nil {
						t.Fatalf("start mcp-server --http: %v\nserver log:\n%s", err, logs.String())
					}
				}
				target = http.Target()
			}
			start := time.Now()
			if err := sc.Run(ctx, target); err != nil {
				t.Fatalf("%v\nserver log:\n%s", err, logs.String())
			}
			t.Logf("%s over %s took %v", sc.Name, target.Name, time.Since(start).Round(time.Millisecond))
		})
	}
}
