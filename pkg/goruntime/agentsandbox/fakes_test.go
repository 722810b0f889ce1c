package agentsandbox

// The fakes every test of the backend runs against: a cluster of fake
// clientsets with a stand-in controller, and a router in front of a real
// runtime server.

import (
	"context"
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

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	// pool, when set, gives each adopted claim a pod of its own (pods.go
	// of the tests: snapshot_test.go); otherwise every sandbox's pod IP is
	// 127.0.0.1. A claim the pool has no pod left for is never ready.
	pool *podPool
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
	c.agents.PrependWatchReactor("*", watchSelectingFields(c.agents.Tracker()))
	c.ext.PrependWatchReactor("*", watchSelectingFields(c.ext.Tracker()))
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

// watchSelectingFields makes a fake clientset's watches select by field
// (the object's name and namespace), as the API server's do. The fake
// ignores field selectors, and its watches with no resource version start
// with every object of the namespace: the SDK's wait for a claim's sandbox
// name takes the first claim its watch sends (sigs.k8s.io/agent-sandbox
// v1.0.3 drainClaimWatch), so a handle could be handed another claim's
// sandbox. The tracker's own resource-version handling is kept.
func watchSelectingFields(tracker ktesting.ObjectTracker) ktesting.WatchReactionFunc {
	return func(a ktesting.Action) (bool, watch.Interface, error) {
		r := a.(ktesting.WatchAction).GetWatchRestrictions()
		if r.Fields == nil || r.Fields.Empty() {
			return false, nil, nil
		}
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace(), metav1.ListOptions{ResourceVersion: r.ResourceVersion})
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			m, err := meta.Accessor(e.Object)
			if err != nil {
				return e, true // a Status event: pass it on
			}
			return e, r.Fields.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
		}), nil
	}
}

// makeReady adopts a warm sandbox for claim. A claim deleted meanwhile is
// not an error (a real controller sees that too).
func (c *cluster) makeReady(claim *extv1beta1.SandboxClaim) error {
	ctx := context.Background()
	ip := "127.0.0.1"
	c.mu.Lock()
	pool := c.pool
	c.mu.Unlock()
	if pool != nil {
		if ip = pool.take(); ip == "" {
			return nil // no pod left: the claim waits, as on an empty warm pool
		}
	}
	name := DefaultWarmPool + "-" + strings.TrimPrefix(claim.Name, "sandbox-claim-")
	_, err := c.agents.AgentsV1beta1().Sandboxes(testNS).Create(ctx, &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS,
			Annotations: map[string]string{sandbox.PodNameAnnotation: name},
		},
		Status: sandboxv1beta1.SandboxStatus{
			PodIPs: []string{ip},
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
