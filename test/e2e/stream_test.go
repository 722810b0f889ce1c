//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// realKubelet reports whether the cluster's nodes are real kubelets: the
// stand-in process node serves no port-forward.
func realKubelet(t *testing.T) bool {
	t.Helper()
	nodes, err := shared.c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "processnode://") {
			return false
		}
	}
	return len(nodes.Items) > 0
}

// streamFirstChunk runs a 2 s command through the backend's ExecStream and
// checks that its first output arrives before it ends.
func streamFirstChunk(t *testing.T, opts agentsandbox.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureBase(t)
	waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)
	opts.Namespace, opts.RestConfig, opts.ReadyTimeout = testNS, shared.c.REST, 90*time.Second
	b, err := agentsandbox.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseAll(context.Background())
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatalf("Open (%s mode, connectivity %s): %v", opts.Mode(), opts.Connectivity, err)
	}
	ss := sb.(goruntime.StreamingSandbox)
	start := time.Now()
	var first time.Duration
	var firstData string
	res, err := ss.ExecStream(ctx, goruntime.ExecRequest{Command: "echo first; sleep 2; echo last", Timeout: time.Minute},
		func(c goruntime.Chunk) {
			if first == 0 {
				first, firstData = time.Since(start), string(c.Data)
			}
		})
	if err != nil {
		t.Fatalf("ExecStream: %v", err)
	}
	total := time.Since(start)
	if res.Stdout != "first\nlast\n" || res.ExitCode != 0 {
		t.Fatalf("ExecStream = %+v", res)
	}
	t.Logf("%s mode, connectivity %s: first chunk %q at %s, command done at %s", opts.Mode(), opts.Connectivity, firstData, first.Round(time.Millisecond), total.Round(time.Millisecond))
	if first == 0 || total-first < 1500*time.Millisecond {
		t.Fatalf("first chunk at %s, command done at %s: the output was not streamed", first, total)
	}
}

// TestStreamFirstChunkDirect: direct-URL mode (files through the router),
// commands over the pod's process API at its pod IP.
func TestStreamFirstChunkDirect(t *testing.T) {
	streamFirstChunk(t, agentsandbox.Options{APIURL: shared.c.RouterURL, Connectivity: agentsandbox.ConnectivityInClusterPodIP})
}

// TestStreamFirstChunkPortForward: the SDK's default mode, everything
// through the API server's port-forward (to the router for files, to the
// pod for commands).
func TestStreamFirstChunkPortForward(t *testing.T) {
	if !realKubelet(t) {
		t.Skip("port-forward needs a real kubelet: this cluster's node is the stand-in process node (test/e2e/processnode), which serves no pods/portforward; test/e2enode (make e2e-node) runs TestStreamFirstChunk on a real kubelet")
	}
	streamFirstChunk(t, agentsandbox.Options{Connectivity: agentsandbox.ConnectivityPortForward})
}

// TestClaimTTLOwnerKilled: an mcp-server with --claim-ttl opens a claim and
// is killed with SIGKILL (no cleanup runs); the controller deletes the
// claim once its shutdown time passes.
func TestClaimTTLOwnerKilled(t *testing.T) {
	bin := frontend(t, "E2E_MCP_SERVER", "cmd/mcp-server")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ensureBase(t)
	waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)
	label := fmt.Sprintf("ttl-%d", time.Now().UnixNano())
	ttl := 30 * time.Second
	cmd := exec.Command(bin, append(backendArgs(), "--claim-ttl="+ttl.String(), "--labels=e2e-run="+label)...)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start mcp-server: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "echo alive"}})
	if err != nil || res.IsError {
		t.Fatalf("run_go_code: %+v %v", res, err)
	}
	b := newBackend(ctx, t)
	claims, err := b.ListClaims(ctx, "e2e-run="+label)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims labelled e2e-run=%s: %+v %v", label, claims, err)
	}
	claim := claims[0]
	if claim.ShutdownTime.IsZero() || claim.ShutdownTime.After(time.Now().Add(ttl+5*time.Second)) {
		t.Fatalf("claim %s shutdown time %s, want within %s", claim.Name, claim.ShutdownTime, ttl)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	for {
		left, err := b.ListClaims(ctx, "e2e-run="+label)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			t.Logf("claim %s gone %s after its owner was killed (TTL %s)", claim.Name, time.Since(killed).Round(time.Second), ttl)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("claim %s still there %s after its owner was killed (TTL %s, shutdown time %s)", claim.Name, time.Since(killed), ttl, left[0].ShutdownTime)
		}
		time.Sleep(time.Second)
	}
}
