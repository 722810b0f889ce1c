package agentsandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func TestOpenClaimsFromWarmPool(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()

	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	claim, ok := c.claim(t, sb.ID())
	if !ok {
		t.Fatalf("Open returned ID %q but no such claim exists", sb.ID())
	}
	if claim.Spec.WarmPoolRef.Name != DefaultWarmPool {
		t.Errorf("claim warm pool = %q, want %q", claim.Spec.WarmPoolRef.Name, DefaultWarmPool)
	}
	for k, want := range map[string]string{ManagedByLabel: ManagedByValue, "example.com/owner": "tests"} {
		if got := claim.Labels[k]; got != want {
			t.Errorf("claim label %s = %q, want %q (labels %v)", k, got, want, claim.Labels)
		}
	}
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "echo hello; echo oops >&2; exit 3"})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.Stdout != "hello\n" || res.Stderr != "oops\n" || res.ExitCode != 3 || res.TimedOut {
		t.Fatalf("Exec = %+v, want hello/oops/3", res)
	}
	// File calls go through the router, which learns which sandbox: the
	// adopted warm sandbox's name, not the claim's.
	if err := sb.WriteFile(ctx, "x.txt", strings.NewReader("x")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	h := r.last()
	wantID := DefaultWarmPool + "-" + strings.TrimPrefix(sb.ID(), "sandbox-claim-")
	if h.Get("X-Sandbox-ID") != wantID || h.Get("X-Sandbox-Namespace") != testNS || h.Get("X-Sandbox-Port") != "8888" {
		t.Errorf("routing headers = ID %q NS %q port %q, want %q %q 8888",
			h.Get("X-Sandbox-ID"), h.Get("X-Sandbox-Namespace"), h.Get("X-Sandbox-Port"), wantID, testNS)
	}
	if got := sb.(*Sandbox).PodName(); got != wantID {
		t.Errorf("PodName = %q, want %q", got, wantID)
	}
}

func TestCloseDeletesClaimDisconnectKeepsIt(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()

	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	id := sb.ID()
	if err := sb.WriteFile(ctx, "state.txt", strings.NewReader("kept\n")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if _, ok := c.claim(t, id); !ok {
		t.Fatalf("claim %s deleted by Disconnect", id)
	}
	if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true"}); !errors.Is(err, goruntime.ErrClosed) {
		t.Fatalf("Exec after Disconnect: err = %v, want ErrClosed", err)
	}
	// CloseAll must not delete a disconnected sandbox's claim.
	if err := b.CloseAll(ctx); err != nil {
		t.Fatalf("CloseAll: %v", err)
	}
	if _, ok := c.claim(t, id); !ok {
		t.Fatalf("CloseAll deleted disconnected claim %s", id)
	}

	again, err := b.Attach(ctx, id)
	if err != nil {
		t.Fatalf("Attach(%s): %v", id, err)
	}
	if again.ID() != id {
		t.Fatalf("Attach ID = %q, want %q", again.ID(), id)
	}
	got, err := again.ReadFile(ctx, "state.txt")
	if err != nil || string(got) != "kept\n" {
		t.Fatalf("ReadFile after Attach = %q, %v; want kept", got, err)
	}
	if _, err := b.Attach(ctx, id); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("second Attach while held: err = %v, want 'already open'", err)
	}

	if err := again.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := c.claim(t, id); ok {
		t.Fatalf("claim %s still exists after Close", id)
	}
	if err := again.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.Attach(ctx, id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("Attach after Close: err = %v, want ErrSandboxNotFound", err)
	}
}

func TestCloseAllDeletesHeldClaims(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()
	var ids []string
	for range 2 {
		sb, err := b.Open(ctx)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		ids = append(ids, sb.ID())
	}
	if err := b.CloseAll(ctx); err != nil {
		t.Fatalf("CloseAll: %v", err)
	}
	for _, id := range ids {
		if _, ok := c.claim(t, id); ok {
			t.Errorf("claim %s survived CloseAll", id)
		}
	}
}

func TestAttachUnknownClaim(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	for _, id := range []string{"sandbox-claim-nope", "Not_A_Name", ""} {
		_, err := b.Attach(t.Context(), id)
		if !errors.Is(err, goruntime.ErrSandboxNotFound) {
			t.Errorf("Attach(%q): err = %v, want ErrSandboxNotFound", id, err)
		}
	}
}

func TestAttachClaimWithoutSandbox(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID()
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	// The pod dies: the controller removes the Sandbox, the claim stays.
	cl, _ := c.claim(t, id)
	if err := c.agents.AgentsV1beta1().Sandboxes(testNS).Delete(ctx, cl.Status.SandboxStatus.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Attach(ctx, id)
	if !errors.Is(err, goruntime.ErrSandboxGone) || !errors.Is(err, sandbox.ErrOrphanedClaim) {
		t.Fatalf("Attach to claim without sandbox: err = %v, want ErrSandboxGone and the SDK's ErrOrphanedClaim", err)
	}
	if !strings.Contains(err.Error(), "kubectl delete sandboxclaim -n "+testNS+" "+id) {
		t.Errorf("error %q does not say how to delete the claim", err)
	}
}

func TestOpenWithoutWarmPool(t *testing.T) {
	c := newCluster(t, clusterSetup{template: true})
	b := newBackend(t, c, newRouter(t), nil)
	_, err := b.Open(t.Context())
	if !errors.Is(err, goruntime.ErrUnavailable) {
		t.Fatalf("Open: err = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"warm pool " + DefaultWarmPool + " not found in namespace " + testNS, "manifests/base", "docs/kubernetes.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if n := c.claimCount(t); n != 0 {
		t.Errorf("%d claims created for a missing warm pool", n)
	}
}

func TestOpenWithoutTemplate(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true})
	b := newBackend(t, c, newRouter(t), nil)
	_, err := b.Open(t.Context())
	if !errors.Is(err, goruntime.ErrUnavailable) || !strings.Contains(err.Error(), "template "+DefaultTemplate+", which does not exist") {
		t.Fatalf("Open: err = %v, want ErrUnavailable naming template %s", err, DefaultTemplate)
	}
	if n := c.claimCount(t); n != 0 {
		t.Errorf("%d claims created for a missing template", n)
	}
}

func TestOpenClaimNeverReady(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	c.setAdopt(false)
	b := newBackend(t, c, newRouter(t), func(o *Options) { o.ReadyTimeout = 500 * time.Millisecond })
	_, err := b.Open(t.Context())
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("Open: err = %v, want the SDK's ErrTimeout", err)
	}
	c.mu.Lock()
	claimed := append([]string(nil), c.claimed...)
	c.mu.Unlock()
	if len(claimed) != 1 {
		t.Fatalf("claims created = %v, want one", claimed)
	}
	if !strings.Contains(err.Error(), "claim "+claimed[0]+" on warm pool "+testNS+"/"+DefaultWarmPool+" was never ready") {
		t.Errorf("error %q does not name claim %s", err, claimed[0])
	}
	if _, ok := c.claim(t, claimed[0]); ok {
		t.Errorf("claim %s left behind after the timeout", claimed[0])
	}
}

func TestPortForwardModeWithoutRouter(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, nil, nil) // no APIURL, no gateway: port-forward
	if b.Options().Mode() != "port-forward" {
		t.Fatalf("mode = %q", b.Options().Mode())
	}
	_, err := b.Open(t.Context())
	if !errors.Is(err, goruntime.ErrUnavailable) || !strings.Contains(err.Error(), "no ready sandbox-router-svc in namespace "+testNS) {
		t.Fatalf("Open: err = %v, want ErrUnavailable naming sandbox-router-svc", err)
	}
	if n := c.claimCount(t); n != 0 {
		t.Errorf("%d claims created without a router", n)
	}

	// With a ready router endpoint the check passes.
	ready := true
	c.disc.PrependReactor("list", "endpointslices", func(ktesting.Action) (bool, runtime.Object, error) {
		return true, &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubernetes.io/service-name": routerService}},
			Endpoints:  []discoveryv1.Endpoint{{Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}}}, nil
	})
	if err := b.checkRouter(t.Context()); err != nil {
		t.Fatalf("checkRouter with a ready endpoint: %v", err)
	}
}

func TestSessionOverBackend(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	ctx := t.Context()
	s, err := goruntime.Open(ctx, b, goruntime.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("goruntime.Open: %v", err)
	}
	res, err := s.Execute(ctx, goruntime.Request{
		Files:   []goruntime.File{{Path: "pkg/a/a.txt", Data: []byte("deep\n")}, {Path: "run.sh", Data: []byte("cat pkg/a/a.txt; echo $X\n"), Mode: 0o755}},
		Command: "./run.sh",
		Env:     map[string]string{"X": "env-ok"},
		Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.Stdout != "deep\nenv-ok\n" || res.ExitCode != 0 || res.Outcome != goruntime.OutcomeOK {
		t.Fatalf("Execute = %+v", res)
	}
	id := s.ID()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.claim(t, id); ok {
		t.Fatalf("claim %s left after Session.Close", id)
	}
}

func TestOptions(t *testing.T) {
	c := newCluster(t, clusterSetup{})
	for name, o := range map[string]Options{
		"label key":        {Labels: map[string]string{"bad key!": "x"}},
		"label value":      {Labels: map[string]string{"ok": "not ok!"}},
		"managed-by":       {Labels: map[string]string{ManagedByLabel: "me"}},
		"warm pool":        {WarmPool: "Pool_1"},
		"namespace":        {Namespace: "a.b"},
		"negative timeout": {ReadyTimeout: -time.Second},
	} {
		o.K8sHelper = c.helper
		if _, err := New(t.Context(), o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	if _, err := New(t.Context(), Options{Kubeconfig: t.TempDir() + "/missing"}); !errors.Is(err, goruntime.ErrUnavailable) {
		t.Errorf("New with a missing kubeconfig: err = %v, want ErrUnavailable", err)
	}

}
