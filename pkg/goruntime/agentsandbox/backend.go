package agentsandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// execGrace is how much longer than a command's timeout an Exec call waits
// for its answer (the kill and time to send the output).
const execGrace = 15 * time.Second

// Backend provisions sandboxes from an agent-sandbox warm pool. It is safe
// for concurrent use.
type Backend struct {
	opts   Options
	k8s    *sandbox.K8sHelper
	client *sandbox.Client

	renewEvery time.Duration // claim renewal period, ClaimTTL/3

	mu sync.Mutex
	// held are the sandboxes still open through this backend, by claim
	// name: a handle's claim may be attached by several calls at once,
	// each its own Sandbox, and each one's Disconnect lets go of its own.
	held map[string][]*Sandbox
}

var _ goruntime.Backend = (*Backend)(nil)

// New connects to the cluster (no API call is made yet) and returns a
// backend. Bad options give an error naming the field; a kubeconfig that
// cannot be loaded gives an error wrapping goruntime.ErrUnavailable.
func New(ctx context.Context, opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("agent-sandbox options: %w", err)
	}
	log := logr.FromSlogHandler(opts.Logger.Handler())

	k8s := opts.K8sHelper
	if k8s == nil {
		cfg := opts.RestConfig
		if cfg == nil && opts.Kubeconfig != "" {
			var err error
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.Kubeconfig},
				&clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("load kubeconfig %s: %w: %w", opts.Kubeconfig, goruntime.ErrUnavailable, err)
			}
		}
		var err error
		k8s, err = sandbox.NewK8sHelper(cfg, log)
		if err != nil {
			return nil, fmt.Errorf("connect to Kubernetes (set Options.Kubeconfig or KUBECONFIG, or run in a pod): %w: %w", goruntime.ErrUnavailable, err)
		}
	}
	// Our own copy, so the caller's helper is not changed.
	helper := *k8s
	labels := map[string]string{ManagedByLabel: ManagedByValue}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	helper.ExtensionsClient = claimsClient{ExtensionsV1beta1Interface: k8s.ExtensionsClient, labels: labels, ttl: opts.ClaimTTL}
	if helper.Log.GetSink() == nil {
		helper.Log = log
	}

	// A command may run for MaxExecTimeout; the SDK must not give up on
	// the HTTP exchange before it ends.
	requestTimeout := opts.MaxExecTimeout + execGrace
	transport := opts.HTTPTransport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	var connectivity sandbox.Connectivity
	serverPort := 0 // the SDK's default, 8888: the port the router is told
	if opts.APIURL == "" && opts.GatewayName == "" {
		switch opts.Connectivity {
		case ConnectivityInClusterPodIP:
			connectivity, serverPort = sandbox.ConnectivityInClusterPodIP, opts.RuntimePort
		case ConnectivityInClusterService:
			connectivity, serverPort = sandbox.ConnectivityInClusterService, opts.RuntimePort
		}
	}
	client, err := sandbox.NewClient(ctx, sandbox.Options{
		Connectivity:        connectivity,
		ServerPort:          serverPort,
		Namespace:           opts.Namespace,
		APIURL:              opts.APIURL,
		GatewayName:         opts.GatewayName,
		GatewayNamespace:    opts.GatewayNamespace,
		SandboxReadyTimeout: opts.ReadyTimeout,
		GatewayReadyTimeout: opts.ReadyTimeout,
		RequestTimeout:      requestTimeout,
		PerAttemptTimeout:   requestTimeout,
		HTTPTransport:       legacyTransport{next: transport},
		K8sHelper:           &helper,
		Logger:              log,
		TraceServiceName:    "go-runtime-sandbox",
	})
	if err != nil {
		return nil, fmt.Errorf("agent-sandbox client: %w", err)
	}
	return &Backend{opts: opts, k8s: &helper, client: client, held: map[string][]*Sandbox{}, renewEvery: opts.ClaimTTL / 3}, nil
}

// Name returns "agent-sandbox".
func (b *Backend) Name() string { return "agent-sandbox" }

// Options returns the options in effect (defaults filled in).
func (b *Backend) Options() Options { return b.opts }

// Open claims a sandbox from the warm pool and waits until it is ready and
// reachable. Before claiming it checks that the warm pool, its template
// and (in port-forward mode) the router exist; if not, the error wraps
// goruntime.ErrUnavailable and says what to install. A claim that does not
// become ready within Options.ReadyTimeout is deleted and the error (which
// wraps the SDK's sandbox.ErrTimeout) names it.
func (b *Backend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	if err := b.preflight(ctx); err != nil {
		return nil, err
	}
	rctx, rec := withClaimRecorder(ctx)
	sb, err := b.client.CreateSandbox(rctx, b.opts.WarmPool, b.opts.Namespace)
	if err != nil {
		return nil, b.explainOpen(err, rec.get())
	}
	return b.hold(sb, b.opts.ClaimTTL, false), nil
}

// Attach reattaches to the claim named id (from Sandbox.ID) in
// Options.Namespace. A missing claim gives an error wrapping
// goruntime.ErrSandboxNotFound; a claim whose sandbox is gone or not ready
// wraps goruntime.ErrSandboxGone.
func (b *Backend) Attach(ctx context.Context, id string) (goruntime.Sandbox, error) {
	if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 {
		return nil, fmt.Errorf("sandbox ID %q is not a claim name: %w", id, goruntime.ErrSandboxNotFound)
	}
	b.mu.Lock()
	busy := len(b.held[id]) > 0
	b.mu.Unlock()
	if busy {
		return nil, fmt.Errorf("sandbox %s is already open through this backend; Disconnect it before attaching again", id)
	}
	ns := b.opts.Namespace
	claim, err := b.k8s.ExtensionsClient.SandboxClaims(ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		if k8serrors.IsNotFound(err) {
			return nil, fmt.Errorf("no claim %s in namespace %s: %w", id, ns, goruntime.ErrSandboxNotFound)
		}
		return nil, fmt.Errorf("get claim %s/%s (is the cluster reachable?): %w: %w", ns, id, goruntime.ErrUnavailable, err)
	}
	if _, ok := claim.Labels[HandleLabel]; ok {
		// Attached by its name, a handle's claim would skip what
		// AttachHandle does: the owner check and the handle's own TTL
		// (it would be renewed by Options.ClaimTTL, and deleted by Close).
		return nil, fmt.Errorf("claim %s belongs to a sandbox handle: attach it through the handle (AttachHandle, an MCP sandbox_id): %w", id, goruntime.ErrSandboxNotFound)
	}
	if err := b.checkClaimRoute(ctx, claim); err != nil {
		return nil, err
	}
	if b.opts.ClaimTTL > 0 {
		// Push the shutdown time out before anything else, so a claim
		// close to expiry is not deleted while we attach.
		if err := b.renewClaim(ctx, id, b.opts.ClaimTTL); err != nil {
			return nil, fmt.Errorf("attach to claim %s: %w", id, err)
		}
	}
	sb, err := b.client.GetSandbox(ctx, id, ns)
	if err != nil {
		switch {
		case errors.Is(err, sandbox.ErrOrphanedClaim), errors.Is(err, sandbox.ErrSandboxDeleted):
			return nil, fmt.Errorf("claim %s exists but its sandbox is gone or not ready (delete the claim: kubectl delete sandboxclaim -n %s %s): %w: %w",
				id, ns, id, goruntime.ErrSandboxGone, err)
		case errors.Is(err, sandbox.ErrTimeout):
			return nil, fmt.Errorf("claim %s got no ready sandbox within %s (kubectl describe sandboxclaim -n %s %s): %w", id, b.opts.ReadyTimeout, ns, id, err)
		}
		return nil, b.explainTransport(fmt.Errorf("attach to claim %s: %w", id, err))
	}
	return b.hold(sb, b.opts.ClaimTTL, false), nil
}

// CloseAll closes (deletes the claims of) every sandbox opened or attached
// through this backend and not yet closed or disconnected, but a durable
// handle's (CreateHandle, AttachHandle), which it releases: the handle
// outlives this process until deleted or idle for its TTL. Use it on
// shutdown, with a context that is not already cancelled.
func (b *Backend) CloseAll(ctx context.Context) error {
	b.mu.Lock()
	var all []*Sandbox
	for _, ss := range b.held {
		all = append(all, ss...)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range all {
		if s.handleTTL > 0 {
			if err := (&handleSandbox{Sandbox: s, ttl: s.handleTTL}).Disconnect(ctx); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := s.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hold registers an open sandbox, its claim renewed to now+ttl while it
// is (no renewal when ttl is 0); handle says it is a durable handle's.
func (b *Backend) hold(sb *sandbox.Sandbox, ttl time.Duration, handle bool) *Sandbox {
	s := &Sandbox{b: b, sb: sb, id: sb.ClaimName()}
	if handle {
		s.handleTTL = ttl
	}
	if b.opts.Connectivity != ConnectivityRouter {
		s.proc = &procAPI{s: s}
	}
	if ttl > 0 {
		every := b.renewEvery
		if ttl != b.opts.ClaimTTL {
			every = max(ttl/3, 100*time.Millisecond) // a handle's own TTL
		}
		s.stopRenew = b.keepAlive(s.id, ttl, every)
	}
	b.mu.Lock()
	b.held[s.id] = append(b.held[s.id], s)
	b.mu.Unlock()
	return s
}

// release forgets s, one of the sandboxes held for its claim.
func (b *Backend) release(s *Sandbox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ss := slices.DeleteFunc(b.held[s.id], func(x *Sandbox) bool { return x == s })
	if len(ss) == 0 {
		delete(b.held, s.id)
		return
	}
	b.held[s.id] = ss
}

// heldFor returns the sandboxes held for claim id.
func (b *Backend) heldFor(id string) []*Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.held[id])
}

// preflight checks what Open needs before creating a claim, so a missing
// piece gives a clear error instead of a claim that times out.
func (b *Backend) preflight(ctx context.Context) error {
	ns, pool := b.opts.Namespace, b.opts.WarmPool
	wp, err := b.k8s.ExtensionsClient.SandboxWarmPools(ns).Get(ctx, pool, metav1.GetOptions{})
	switch {
	case k8serrors.IsNotFound(err):
		return fmt.Errorf("warm pool %s not found in namespace %s: install agent-sandbox v1.0.3 with extensions, then apply the template and warm pool (kubectl apply -n %s -k manifests/base; see docs/kubernetes.md): %w",
			pool, ns, ns, goruntime.ErrUnavailable)
	case err != nil:
		return fmt.Errorf("get warm pool %s/%s (is the cluster reachable and agent-sandbox installed?): %w: %w", ns, pool, goruntime.ErrUnavailable, err)
	}
	tmpl := wp.Spec.TemplateRef.Name
	if tmpl == "" {
		return fmt.Errorf("warm pool %s/%s names no sandboxTemplateRef: %w", ns, pool, goruntime.ErrUnavailable)
	}
	t, err := b.k8s.ExtensionsClient.SandboxTemplates(ns).Get(ctx, tmpl, metav1.GetOptions{})
	if err != nil {
		if k8serrors.IsNotFound(err) {
			return fmt.Errorf("warm pool %s/%s uses template %s, which does not exist in namespace %s (kubectl apply -n %s -k manifests/base): %w",
				ns, pool, tmpl, ns, ns, goruntime.ErrUnavailable)
		}
		return fmt.Errorf("get template %s/%s: %w: %w", ns, tmpl, goruntime.ErrUnavailable, err)
	}
	if err := b.checkTemplateRoute(ctx, t); err != nil {
		return err
	}
	if wp.Status.ReadyReplicas == 0 {
		b.opts.Logger.WarnContext(ctx, "warm pool has no ready sandboxes; the claim waits for a cold start",
			"warm_pool", pool, "namespace", ns, "replicas", wp.Status.Replicas)
	}
	inCluster := b.opts.Connectivity == ConnectivityInClusterPodIP || b.opts.Connectivity == ConnectivityInClusterService
	if b.opts.Mode() == "port-forward" && !inCluster { // in-cluster, the SDK dials the pod, not the router
		if err := b.checkRouter(ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkRouter looks for a ready endpoint of sandbox-router-svc, which the
// SDK port-forwards to.
func (b *Backend) checkRouter(ctx context.Context) error {
	ns := b.opts.Namespace
	if b.k8s.DiscoveryClient == nil {
		return nil // the SDK reports it; nothing to check with
	}
	slices, err := b.k8s.DiscoveryClient.EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "kubernetes.io/service-name=" + routerService,
	})
	if err != nil {
		return fmt.Errorf("list endpoints of %s/%s: %w: %w", ns, routerService, goruntime.ErrUnavailable, err)
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return nil
			}
		}
	}
	return fmt.Errorf("no ready %s in namespace %s: port-forward mode needs the sandbox-router there (kubectl apply -n %s -k manifests/router; see docs/kubernetes.md), or set Options.APIURL or Options.GatewayName: %w",
		routerService, ns, ns, goruntime.ErrUnavailable)
}

// explainOpen adds what a user can do to an SDK error from CreateSandbox.
// The SDK's sentinels stay reachable with errors.Is.
func (b *Backend) explainOpen(err error, claim string) error {
	ns, pool := b.opts.Namespace, b.opts.WarmPool
	name := claim
	if name == "" {
		name = "(none created)"
	}
	switch {
	case errors.Is(err, sandbox.ErrClaimFailed):
		return fmt.Errorf("create a claim on warm pool %s/%s (RBAC needs create on sandboxclaims.extensions.agents.x-k8s.io): %w", ns, pool, err)
	case errors.Is(err, sandbox.ErrTimeout) && strings.Contains(err.Error(), "did not get an address"):
		return fmt.Errorf("gateway %s/%s has no address after %s (is a Gateway controller installed?): %w",
			b.opts.GatewayNamespace, b.opts.GatewayName, b.opts.ReadyTimeout, err)
	case errors.Is(err, sandbox.ErrTimeout):
		return fmt.Errorf("claim %s on warm pool %s/%s was never ready within %s and was deleted; check `kubectl get sandboxwarmpool -n %s %s` and the pool's pods (`kubectl get pods -n %s`, `kubectl describe pod`: image pull errors, Pending for lack of CPU/memory, a failing readiness probe): %w",
			name, ns, pool, b.opts.ReadyTimeout, ns, pool, ns, err)
	case errors.Is(err, sandbox.ErrSandboxDeleted):
		return fmt.Errorf("claim %s on warm pool %s/%s: its sandbox was deleted before it became ready: %w", name, ns, pool, err)
	}
	return b.explainTransport(fmt.Errorf("claim %s on warm pool %s/%s: %w", name, ns, pool, err))
}

// explainTransport adds a hint to errors reaching the router.
func (b *Backend) explainTransport(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no ready endpoints for "+routerService):
		return fmt.Errorf("%w (install the sandbox-router in namespace %s, see docs/kubernetes.md): %w", err, b.opts.Namespace, goruntime.ErrUnavailable)
	case errors.Is(err, sandbox.ErrPortForwardDied), strings.Contains(msg, "port-forward"):
		return fmt.Errorf("%w (port-forward to %s/%s failed: check RBAC for pods/portforward, or set Options.APIURL)", err, b.opts.Namespace, routerService)
	}
	return err
}
