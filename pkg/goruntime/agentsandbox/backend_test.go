package agentsandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	fakediscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1/fake"
	ktesting "k8s.io/client-go/testing"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	fakeagents "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned/fake"
	fakeextensions "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned/fake"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

const testNS = "sandboxes"

// cluster is the real SDK's view of a cluster, made of fake clientsets,
// with a goroutine standing in for the agent-sandbox controller: for each
// new claim it creates a ready Sandbox (as a warm pool adoption would,
// under a name of its own) and records it in the claim's status.
type cluster struct {
	agents *fakeagents.Clientset
	ext    *fakeextensions.Clientset
	disc   *fakediscoveryv1.FakeDiscoveryV1
	helper *sandbox.K8sHelper

	mu      sync.Mutex
	adopt   bool // controller makes new claims ready
	seq     int
	claimed []string // claim names, in creation order
}

type clusterSetup struct {
	pool, template bool // create the warm pool / its template
}

func newCluster(t testing.TB, setup clusterSetup) *cluster {
	t.Helper()
	c := &cluster{
		agents: fakeagents.NewSimpleClientset(),     //nolint:staticcheck // the SDK's clientsets have no apply configurations
		ext:    fakeextensions.NewSimpleClientset(), //nolint:staticcheck
		disc:   &fakediscoveryv1.FakeDiscoveryV1{Fake: &ktesting.Fake{}},
		adopt:  true,
	}
	ctx := context.Background()
	if setup.template {
		_, err := c.ext.ExtensionsV1beta1().SandboxTemplates(testNS).Create(ctx, &extv1beta1.SandboxTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultTemplate, Namespace: testNS},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	if setup.pool {
		_, err := c.ext.ExtensionsV1beta1().SandboxWarmPools(testNS).Create(ctx, &extv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultWarmPool, Namespace: testNS},
			Spec:       extv1beta1.SandboxWarmPoolSpec{TemplateRef: extv1beta1.SandboxTemplateRef{Name: DefaultTemplate}},
			Status:     extv1beta1.SandboxWarmPoolStatus{Replicas: 2, ReadyReplicas: 2},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The API server's GenerateName.
	c.ext.PrependReactor("create", "sandboxclaims", func(a ktesting.Action) (bool, runtime.Object, error) {
		claim := a.(ktesting.CreateAction).GetObject().(*extv1beta1.SandboxClaim)
		if claim.Name == "" {
			c.mu.Lock()
			c.seq++
			claim.Name = fmt.Sprintf("%s%05d", claim.GenerateName, c.seq)
			c.claimed = append(c.claimed, claim.Name)
			c.mu.Unlock()
		}
		return false, nil, nil
	})
	w, err := c.ext.ExtensionsV1beta1().SandboxClaims(testNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			claim, ok := ev.Object.(*extv1beta1.SandboxClaim)
			if ev.Type != watch.Added || !ok {
				continue
			}
			c.mu.Lock()
			adopt := c.adopt
			c.mu.Unlock()
			if adopt {
				if err := c.makeReady(claim); err != nil {
					t.Errorf("fake controller: adopt claim %s: %v", claim.Name, err)
				}
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	c.helper = &sandbox.K8sHelper{
		AgentsClient:     c.agents.AgentsV1beta1(),
		ExtensionsClient: c.ext.ExtensionsV1beta1(),
		DiscoveryClient:  c.disc,
	}
	return c
}

// makeReady adopts a warm sandbox for claim. A claim deleted meanwhile is
// not an error (a real controller sees that too).
func (c *cluster) makeReady(claim *extv1beta1.SandboxClaim) error {
	ctx := context.Background()
	name := DefaultWarmPool + "-" + strings.TrimPrefix(claim.Name, "sandbox-claim-")
	_, err := c.agents.AgentsV1beta1().Sandboxes(testNS).Create(ctx, &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS,
			Annotations: map[string]string{sandbox.PodNameAnnotation: name},
		},
		Status: sandboxv1beta1.SandboxStatus{
			PodIPs: []string{"127.0.0.1"},
			Conditions: []metav1.Condition{{
				Type: string(sandboxv1beta1.SandboxConditionReady), Status: metav1.ConditionTrue,
				Reason: "DependenciesReady", LastTransitionTime: metav1.Now(),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	claim = claim.DeepCopy()
	claim.Status.SandboxStatus.Name = name
	_, err = c.ext.ExtensionsV1beta1().SandboxClaims(testNS).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if k8serrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *cluster) setAdopt(v bool) {
	c.mu.Lock()
	c.adopt = v
	c.mu.Unlock()
}

func (c *cluster) claim(t *testing.T, name string) (*extv1beta1.SandboxClaim, bool) {
	t.Helper()
	cl, err := c.ext.ExtensionsV1beta1().SandboxClaims(testNS).Get(context.Background(), name, metav1.GetOptions{})
	if k8serrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cl, true
}

func (c *cluster) claimCount(t *testing.T) int {
	t.Helper()
	l, err := c.ext.ExtensionsV1beta1().SandboxClaims(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// router stands in for the sandbox-router in front of a real runtime
// server (internal/server), recording the routing headers.
type router struct {
	srv  *httptest.Server
	dir  string
	proc *processapi.Server // the process API on loopback, as the pod serves it

	mu      sync.Mutex
	headers []http.Header
	paths   []string // method and path of each request, in order
}

// sawPath reports whether the runtime server got a request for method
// and path.
func (r *router) sawPath(methodPath string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.paths, methodPath)
}

func newRouter(t testing.TB) *router {
	t.Helper()
	dir := t.TempDir()
	rs, err := server.New(server.Config{
		BaseDir:        dir,
		ExecTimeout:    60 * time.Second,
		MaxOutputBytes: 1 << 20,
		MaxUploadBytes: 1 << 20,
		Environ:        os.Environ(),
		FallbackHome:   t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	proc, err := processapi.Start(context.Background(), processapi.Config{
		GRPCAddr: "127.0.0.1:0", RESTAddr: "127.0.0.1:0", RootDir: dir, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	r := &router{dir: dir, proc: proc}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Clone())
		r.paths = append(r.paths, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		rs.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *router) last() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers[len(r.headers)-1]
}

func port(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newBackend(t testing.TB, c *cluster, r *router, mod func(*Options)) *Backend {
	t.Helper()
	opts := Options{
		Namespace:    testNS,
		K8sHelper:    c.helper,
		ReadyTimeout: 10 * time.Second,
		Logger:       quietLogger(),
		Labels:       map[string]string{"example.com/owner": "tests"},
	}
	if r != nil {
		opts.APIURL = r.srv.URL
		// The fake controller gives every sandbox pod IP 127.0.0.1, where
		// the process API listens.
		opts.Connectivity = ConnectivityInClusterPodIP
		opts.ProcessGRPCPort = port(t, r.proc.GRPCAddr())
		opts.ProcessRESTPort = port(t, r.proc.RESTAddr())
		// ... and the runtime server, behind the fake router here.
		opts.RuntimePort = port(t, strings.TrimPrefix(r.srv.URL, "http://"))
	}
	if mod != nil {
		mod(&opts)
	}
	b, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.CloseAll(context.Background()); err != nil {
			t.Errorf("CloseAll: %v", err)
		}
	})
	return b
}

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

func TestExecEnvAndTimeout(t *testing.T) {
	for _, conn := range []string{ConnectivityInClusterPodIP, ConnectivityRouter} {
		t.Run(conn, func(t *testing.T) { testExecEnvAndTimeout(t, conn) })
	}
}

func testExecEnvAndTimeout(t *testing.T, conn string) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, func(o *Options) { o.MaxExecTimeout = time.Minute; o.Connectivity = conn })
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Env", func(t *testing.T) {
		env := map[string]string{"GREETING": "it's a \"test\" $HOME `x` \\n", "EMPTY": "", "PATH_EXTRA": "a b\nc"}
		res, err := sb.Exec(ctx, goruntime.ExecRequest{
			Command: `printf '%s|%s|%s' "$GREETING" "$EMPTY" "$PATH_EXTRA"`, Env: env, Timeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := env["GREETING"] + "||" + env["PATH_EXTRA"]
		if res.Stdout != want || res.ExitCode != 0 {
			t.Fatalf("Exec = %+v, want stdout %q", res, want)
		}
	})
	t.Run("EnvWithoutTimeout", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: `echo "$A"; exit 5`, Env: map[string]string{"A": "x'y"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "x'y\n" || res.ExitCode != 5 {
			t.Fatalf("Exec = %+v", res)
		}
	})
	t.Run("TimeoutKillsTheProcessGroup", func(t *testing.T) {
		start := time.Now()
		res, err := sb.Exec(ctx, goruntime.ExecRequest{
			Command: `echo started; sh -c 'echo $$ > bg.pid; exec sleep 30' & sleep 30; echo finished`,
			Timeout: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" {
			t.Fatalf("Exec = %+v, want TimedOut, exit 124, stdout started", res)
		}
		if el := time.Since(start); el > 20*time.Second {
			t.Errorf("timed-out Exec took %s", el)
		}
		// The background child was in the process group: it must be dead
		// (gone, or a zombie waiting for a reaper).
		res, err = sb.Exec(ctx, goruntime.ExecRequest{Command: `pid=$(cat bg.pid) && for i in 1 2 3 4 5 6 7 8 9 10; do st=$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null); case "$st" in ""|Z) echo gone; exit 0;; esac; sleep 0.2; done; echo "alive $pid $st"`})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "gone\n" {
			t.Errorf("background child after the timeout: %q %q, want gone", res.Stdout, res.Stderr)
		}
	})
	t.Run("TermIgnored", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: `trap "" TERM; sleep 30`, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("Exec = %+v, want TimedOut after SIGKILL, exit 124", res)
		}
	})
	t.Run("CommandExiting124IsNotATimeout", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "echo 'timeout: sending signal TERM to command /bin/sh' >&2; echo tail >&2; exit 124", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("Exec = %+v, want exit 124 without TimedOut", res)
		}
	})
	t.Run("DeadlineReachesRouter", func(t *testing.T) {
		if conn != ConnectivityRouter {
			t.Skip("commands do not go through the router with connectivity " + conn)
		}
		timeout := 2 * time.Second
		if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: timeout}); err != nil {
			t.Fatal(err)
		}
		v := r.last().Get("X-Sandbox-Timeout")
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("X-Sandbox-Timeout = %q: %v", v, err)
		}
		if d := time.Duration(secs * float64(time.Second)); d <= timeout || d > timeout+execGrace {
			t.Fatalf("X-Sandbox-Timeout = %s, want in (%s, %s]", d, timeout, timeout+execGrace)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		for name, req := range map[string]goruntime.ExecRequest{
			"env name":     {Command: "true", Env: map[string]string{"A-B": "x"}},
			"env NUL":      {Command: "true", Env: map[string]string{"A": "x\x00"}},
			"command NUL":  {Command: "true\x00"},
			"over the max": {Command: "true", Timeout: 2 * time.Minute},
		} {
			n := len(r.headers)
			if _, err := sb.Exec(ctx, req); err == nil {
				t.Errorf("%s: Exec accepted %+v", name, req)
			}
			r.mu.Lock()
			sent := len(r.headers) - n
			r.mu.Unlock()
			if sent != 0 {
				t.Errorf("%s: %d requests sent for refused input", name, sent)
			}
		}
	})
}

func TestFiles(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	content := "package main\n\x00\xff"
	if err := sb.WriteFile(ctx, "main.go", strings.NewReader(content)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := sb.ReadFile(ctx, "main.go")
	if err != nil || string(got) != content {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "mkdir -p sub && echo x > sub/f"}); err != nil {
		t.Fatal(err)
	}
	entries, err := sb.List(ctx, ".")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	seen := map[string]goruntime.FileInfo{}
	for _, e := range entries {
		seen[e.Name] = e
	}
	if f := seen["main.go"]; f.IsDir || f.Size != int64(len(content)) || time.Since(f.ModTime) > time.Minute {
		t.Errorf("List main.go = %+v", f)
	}
	if d := seen["sub"]; !d.IsDir {
		t.Errorf("List sub = %+v, want a directory", d)
	}
	if got, err := sb.ReadFile(ctx, "sub/f"); err != nil || string(got) != "x\n" {
		t.Errorf("ReadFile(sub/f) = %q, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"read missing", goruntime.ErrNotExist, func() error { _, err := sb.ReadFile(ctx, "nope.go"); return err }},
		{"list missing", goruntime.ErrNotExist, func() error { _, err := sb.List(ctx, "nope"); return err }},
		{"read absolute", goruntime.ErrPathEscape, func() error { _, err := sb.ReadFile(ctx, "/etc/passwd"); return err }},
		{"read dotdot", goruntime.ErrPathEscape, func() error { _, err := sb.ReadFile(ctx, "sub/../../x"); return err }},
		{"list dotdot", goruntime.ErrPathEscape, func() error { _, err := sb.List(ctx, ".."); return err }},
		{"write subpath", goruntime.ErrPathEscape, func() error { return sb.WriteFile(ctx, "a/b.go", strings.NewReader("x")) }},
		{"write dotdot", goruntime.ErrPathEscape, func() error { return sb.WriteFile(ctx, "..", strings.NewReader("x")) }},
		{"write over server limit", goruntime.ErrTooLarge, func() error {
			return sb.WriteFile(ctx, "big.bin", strings.NewReader(strings.Repeat("x", 2<<20)))
		}},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
	// The server's own refusal (a symlink out of /app) maps to ErrPathEscape.
	if err := os.Symlink("/etc", r.dir+"/etc-link"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ReadFile(ctx, "etc-link/hostname"); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("read through escaping symlink: err = %v, want ErrPathEscape", err)
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
