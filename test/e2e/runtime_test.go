//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// runtimeTarget is one way the node runs sandboxes: a namespace holding the
// project's manifests (a kustomization applied unchanged), the warm pool
// they define, and a sandbox-router from manifests/router.
type runtimeTarget struct {
	name       string // runc | gvisor
	ns         string
	kustomize  string // relative to the repository
	runtimeCls string // the pods' runtimeClassName ("" = the node's default, runc)
	// gvisor: a port-forward into the pod cannot reach it (see connectivity).
	noPodPortForward bool

	applied   bool
	routerURL string // http://<router pod IP>:8080, set by activate
}

var (
	runcTarget   = &runtimeTarget{name: "runc", ns: "e2e", kustomize: "manifests/base"}
	gvisorTarget = &runtimeTarget{name: "gvisor", ns: "e2e-gvisor", kustomize: "manifests/overlays/gvisor", runtimeCls: "gvisor", noPodPortForward: true}
	runtimes     = []*runtimeTarget{gvisorTarget, runcTarget}
)

// fullMatrix reports whether E2E_FULL=1 asked for every flow under every
// runtime (make e2e-full).
func fullMatrix() bool { return os.Getenv("E2E_FULL") == "1" }

// clientSideFlow skips t under gVisor unless the full matrix was asked for:
// t exercises the client side (backend, SDK, router, controller), which
// runc's run of the same flow already covers, and a flow under gVisor costs
// several times its runc run (TestRuntimes).
func (rt *runtimeTarget) clientSideFlow(t *testing.T) {
	t.Helper()
	if rt == gvisorTarget && !fullMatrix() {
		t.Skip("client-side flow: runs under runc; under gVisor too with E2E_FULL=1 (make e2e-full)")
	}
}

// connMode is how clients reach the router: through a port-forward the SDK
// opens to sandbox-router-svc (its default), or at a URL.
type connMode struct {
	name   string
	direct bool
}

var modes = []connMode{{name: "portforward"}, {name: "direct", direct: true}}

// connectivity is how commands reach rt's pods in mode m (the backend's
// --connectivity; "" = its default, a port-forward to the pod). A
// port-forward into a gVisor pod is refused: the kubelet's port-forward
// dials localhost in the pod's network namespace, but runsc's sockets live
// in gVisor's own network stack (google/gvisor#3811,
// kubernetes-sigs/agent-sandbox#158). So under gVisor commands go to the
// pod IP (the test process is on the node, so on the pod network). In
// direct mode file calls still go through the router's URL; in
// "portforward" mode, with no router URL, the SDK sends them to the pod IP
// too (no port-forward at all). The other choice, --connectivity=router,
// failed the MCP cancellation scenario here (a cancelled call's program
// kept running; docs/e2e.md).
func (rt *runtimeTarget) connectivity(connMode) string {
	if rt.noPodPortForward {
		return agentsandbox.ConnectivityInClusterPodIP
	}
	return ""
}

// activate makes rt's warm pool the one that is filled: the node's two CPUs
// hold one pool of the template's 500m pods at a time, so the pool of the
// runtime that was active before is scaled to zero first. The first
// activation creates the namespace, the router (manifests/router) and the
// template and pool (rt.kustomize), all by server-side apply, unchanged;
// later ones re-apply the kustomization, which sets replicas back.
func activate(t testing.TB, rt *runtimeTarget) {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := shared.c
	if prev := shared.active; prev != nil && prev != rt {
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := extClient(t).ExtensionsV1beta1().SandboxWarmPools(prev.ns).Patch(ctx, agentsandbox.DefaultWarmPool, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e-activate"}); err != nil {
			t.Fatalf("scale warm pool %s/%s to 0: %v", prev.ns, agentsandbox.DefaultWarmPool, err)
		}
		waitNoSandboxPods(ctx, t, prev.ns)
	}
	if shared.active == rt {
		return
	}
	if !rt.applied {
		if err := c.EnsureNamespace(ctx, rt.ns); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyKustomization(ctx, rt.ns, filepath.Join(shared.repo, "manifests", "router"), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ApplyKustomization(ctx, rt.ns, filepath.Join(shared.repo, rt.kustomize), true); err != nil {
		t.Fatal(err)
	}
	rt.applied = true
	ip := waitRouter(ctx, t, rt.ns)
	rt.routerURL = "http://" + ip + ":8080"
	shared.active = rt
	start := time.Now()
	n := waitPoolReady(ctx, t, rt.ns, agentsandbox.DefaultWarmPool, 0)
	t.Logf("%s: warm pool %s/%s has %d ready replicas after %v; router at %s", rt.name, rt.ns, agentsandbox.DefaultWarmPool, n, time.Since(start).Round(time.Millisecond), rt.routerURL)
}

// waitRouter waits for a Ready sandbox-router pod in ns and returns its IP.
func waitRouter(ctx context.Context, t testing.TB, ns string) string {
	t.Helper()
	ip, err := shared.c.WaitRouter(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// waitNoSandboxPods waits until ns has no pods but the router's.
func waitNoSandboxPods(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	for {
		pods, err := shared.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app!=sandbox-router"})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pods of %s still there after scaling its warm pool to 0: %s", ns, podSummary(ns))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPoolReady waits until the warm pool has at least n ready replicas
// (n <= 0: all of them) and returns how many it wants in all.
func waitPoolReady(ctx context.Context, t testing.TB, ns, pool string, n int32) int32 {
	t.Helper()
	want, err := shared.c.WaitWarmPool(ctx, ns, pool, n)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// poolReady waits until rt's warm pool has at least n ready sandboxes
// (n <= 0: a full pool) before a flow claims n at once from it. A claim
// made while the pool has no ready sandbox gets a pod of its own (a cold
// start) while the pool refills beside it, and the node's two CPUs fit
// only three of the template's 500m pods next to the router: such a
// claim's pod could stay Pending for want of CPU. A claim that takes a
// ready sandbox starts nothing, so a flow need not wait for the whole
// pool to refill after the one before it (it did, and that waiting was
// about a minute of each run).
func poolReady(ctx context.Context, t testing.TB, rt *runtimeTarget, n int32) {
	t.Helper()
	waitPoolReady(ctx, t, rt.ns, agentsandbox.DefaultWarmPool, n)
}

// newBackend returns the agent-sandbox backend for rt in the given mode.
func newBackend(ctx context.Context, t testing.TB, rt *runtimeTarget, m connMode) *agentsandbox.Backend {
	t.Helper()
	opts := agentsandbox.Options{
		Namespace:    rt.ns,
		RestConfig:   shared.c.REST,
		ReadyTimeout: 2 * time.Minute,
		Connectivity: rt.connectivity(m),
	}
	if m.direct {
		opts.APIURL = rt.routerURL
	}
	b, err := agentsandbox.New(ctx, opts)
	if err != nil {
		t.Fatalf("agent-sandbox backend (%s, %s): %v", rt.name, m.name, err)
	}
	return b
}

// backendArgs are the flags cmd/demo and cmd/mcp-server share for the
// agent-sandbox backend: port-forward mode unless m is direct.
func backendArgs(rt *runtimeTarget, m connMode) []string {
	args := []string{
		"--backend=agent-sandbox",
		"--kubeconfig=" + shared.c.Kubeconfig,
		"--namespace=" + rt.ns,
		"--warm-pool-name=" + agentsandbox.DefaultWarmPool,
	}
	if m.direct {
		args = append(args, "--api-url="+rt.routerURL)
	}
	if c := rt.connectivity(m); c != "" {
		args = append(args, "--connectivity="+c)
	}
	return args
}
