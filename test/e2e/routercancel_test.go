//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// cancelProbe writes ./finished two seconds after it starts, then sleeps
// as "sleep 60": a cancel that reaches the pod in time leaves neither.
const cancelProbe = "echo started; sleep 2; echo yes > finished; exec sleep 60"

// cancelCheck lists what cancelProbe left: ./finished, and every live
// process whose command line is exactly "sleep 60".
const cancelCheck = `ls; for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null); case "$c" in "sleep 60 ") echo "alive ${p#/proc/}";; esac; done`

// testRouterCancel cancels a command sent through the router
// (--connectivity=router: the legacy POST /execute, the one way for a
// caller outside the cluster to reach a gVisor pod) 700 ms after sending
// it, then looks whether the program was killed: it must not have written
// ./finished (at 2 s) nor be running. The trace of the cancelled request
// (the runtime server's exec log line: duration, client_gone; the
// router's log) is logged either way.
func testRouterCancel(t *testing.T, rt *runtimeTarget, m connMode) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	opts := agentsandbox.Options{Namespace: rt.ns, RestConfig: shared.c.REST, ReadyTimeout: 2 * time.Minute, Connectivity: agentsandbox.ConnectivityRouter}
	if m.direct {
		opts.APIURL = rt.routerURL
	}
	b, err := agentsandbox.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatalf("Open (router, %s): %v; pods: %s", m.name, err, podSummary(rt.ns))
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	pod := sb.(*agentsandbox.Sandbox).PodName()
	mustExec(ctx, t, sb, "true") // the route is open before the timed part

	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	sent := time.Now()
	go func() {
		_, err := sb.Exec(cctx, goruntime.ExecRequest{Command: cancelProbe, Timeout: 90 * time.Second})
		done <- err
	}()
	time.Sleep(700 * time.Millisecond)
	stop()
	cancelled := time.Now()
	var callErr error
	select {
	case callErr = <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("a cancelled Exec through the router did not return within 15 s")
	}
	returned := time.Since(cancelled)
	if callErr == nil {
		t.Errorf("the cancelled Exec returned a result")
	}
	time.Sleep(time.Until(sent.Add(3 * time.Second))) // past the probe's 2 s
	left := mustExec(ctx, t, sb, cancelCheck).Stdout
	wrote, alive := strings.Contains(left, "finished\n"), strings.Contains(left, "alive ")

	trace := routerCancelTrace(ctx, rt, pod)
	outcome := "killed"
	switch {
	case wrote && alive:
		outcome = "kept running (wrote ./finished, sleep 60 alive)"
	case wrote:
		outcome = "kept running past 2 s (wrote ./finished)"
	case alive:
		outcome = "still running"
	}
	report(t, "router-cancel-"+rt.name+"-"+m.name, "router cancel (%s, %s): %s; the call returned %d ms after the cancel; server: %s",
		rt.name, m.name, outcome, returned.Milliseconds(), trace.server)
	t.Logf("trace of the cancelled call (%s, %s), sent at %s, cancelled at %s:\nruntime server (pod %s):\n%s\nrouter:\n%s\nleft in /app and /proc:\n%s",
		rt.name, m.name, sent.Format("15:04:05.000"), cancelled.Format("15:04:05.000"), pod, trace.serverLog, trace.routerLog, left)
	if outcome != "killed" {
		t.Errorf("router cancel (%s, %s): the cancelled program %s", rt.name, m.name, outcome)
	}
}

type cancelTrace struct {
	server               string // the exec line's verdict, one line
	serverLog, routerLog string
}

// routerCancelTrace reads the runtime server's log lines about the probe
// (its JSON exec line says how long the command ran and whether the client
// had gone) and the router's last lines.
func routerCancelTrace(ctx context.Context, rt *runtimeTarget, pod string) cancelTrace {
	var tr cancelTrace
	out, err := shared.c.Kubectl(ctx, "logs", "-n", rt.ns, pod, "-c", "runtime")
	if err != nil {
		tr.server = fmt.Sprintf("no log: %v", err)
		return tr
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "sleep 2") || strings.Contains(l, `"/execute"`) {
			lines = append(lines, l)
		}
	}
	tr.serverLog = strings.Join(lines, "\n")
	tr.server = "no exec line for the probe"
	for _, l := range lines {
		if strings.Contains(l, `"msg":"exec"`) && strings.Contains(l, "sleep 2") {
			tr.server = fieldsOf(l, "exit_code", "signal", "duration_ms", "client_gone")
		}
	}
	if out, err := shared.c.Kubectl(ctx, "logs", "-n", rt.ns, "-l", "app=sandbox-router", "--tail=15"); err == nil {
		tr.routerLog = string(out)
	} else {
		tr.routerLog = err.Error()
	}
	return tr
}

// fieldsOf picks "key":value pairs out of a JSON log line, as text.
func fieldsOf(line string, keys ...string) string {
	var parts []string
	for _, k := range keys {
		_, rest, ok := strings.Cut(line, `"`+k+`":`)
		if !ok {
			continue
		}
		if i := strings.IndexAny(rest, ",}"); i >= 0 {
			rest = rest[:i]
		}
		parts = append(parts, k+"="+rest)
	}
	return strings.Join(parts, " ")
}

// testRouterCancelMCP runs the MCP smoke suite's cancellation scenario
// (a run_go_code cancelled by the client while its program runs; the
// program must not write ./finished) with mcp-server reaching the pods
// through the router (--connectivity=router, --api-url), the way the
// last round saw it fail under gVisor.
func testRouterCancelMCP(t *testing.T, rt *runtimeTarget) {
	server := binary(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 1)
	args := []string{
		"--backend=agent-sandbox", "--kubeconfig=" + shared.c.Kubeconfig, "--namespace=" + rt.ns,
		"--warm-pool-name=" + agentsandbox.DefaultWarmPool, "--api-url=" + rt.routerURL,
		"--connectivity=" + agentsandbox.ConnectivityRouter,
	}
	var logs syncBuffer
	target := smoke.StdioTarget(server, args, &logs)
	for _, sc := range smoke.Scenarios() {
		if sc.Name != "cancellation" {
			continue
		}
		start := time.Now()
		err := sc.Run(ctx, target)
		verdict := "held (the cancelled program was killed)"
		if err != nil {
			verdict = "FAILED: " + err.Error()
		}
		report(t, "router-cancel-mcp-"+rt.name, "router cancel (%s, MCP run_go_code over --connectivity=router): %s in %v", rt.name, verdict, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("MCP cancellation through the router (%s): %v\nserver log:\n%s\npods: %s", rt.name, err, logs.String(), podSummary(rt.ns))
		}
		return
	}
	t.Fatal("the smoke suite has no cancellation scenario")
}
