package agentsandbox

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
)

// Names the manifests in manifests/base create; Options defaults to them.
const (
	// DefaultWarmPool is the SandboxWarmPool manifests/base creates.
	DefaultWarmPool = "go-runtime-pool"
	// DefaultTemplate is the SandboxTemplate manifests/base creates.
	DefaultTemplate = "go-runtime"
	// DefaultNamespace is where claims go when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultReadyTimeout bounds how long Open waits for a claim's sandbox.
	DefaultReadyTimeout = 180 * time.Second
	// DefaultMaxExecTimeout is the longest ExecRequest.Timeout accepted.
	DefaultMaxExecTimeout = 10 * time.Minute

	// ManagedByLabel is set on every claim this backend creates, so
	// `kubectl delete sandboxclaims -l app.kubernetes.io/managed-by=go-runtime-sandbox`
	// removes leftovers.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "go-runtime-sandbox"

	// DefaultProcessGRPCPort and DefaultProcessRESTPort are where our
	// runtime image serves the sandboxd API (manifests/base).
	DefaultProcessGRPCPort = 9090
	DefaultProcessRESTPort = 9091
	// DefaultRuntimePort is where the runtime server serves its contract
	// (/unpack among it) in the pod (manifests/base).
	DefaultRuntimePort = 8888

	// routerService is the Service the SDK port-forwards to; its name is
	// fixed by agent-sandbox.
	routerService = "sandbox-router-svc"

	// DefaultSnapshotBytes is Options.SnapshotBytes's default (the local
	// backend's too).
	DefaultSnapshotBytes = 4 << 30

	// portForwardTimeout bounds opening a port-forward to a sandbox pod.
	portForwardTimeout = 30 * time.Second
	// minClaimTTL is the shortest Options.ClaimTTL accepted: renewal runs
	// every third of it and must not hammer the API server.
	minClaimTTL = 30 * time.Second
)

// Connectivity values: how commands reach the sandbox pod's process API
// (and, in the in-cluster modes, how the SDK reaches its runtime).
const (
	// ConnectivityPortForward (the default) port-forwards to the sandbox
	// pod through the API server, as the SDK does: works wherever a
	// kubeconfig does; needs create on pods/portforward.
	ConnectivityPortForward = "port-forward"
	// ConnectivityInClusterPodIP dials the pod IP: for callers on the pod
	// network. File calls then also go straight to the pod, not the router.
	ConnectivityInClusterPodIP = "in-cluster-pod-ip"
	// ConnectivityInClusterService dials the Sandbox's headless Service
	// (spec.service: true on the template).
	ConnectivityInClusterService = "in-cluster-service"
	// ConnectivityRouter runs commands over the legacy contract through the
	// sandbox-router (no streaming, stdin or signals); Gateway mode always
	// does.
	ConnectivityRouter = "router"
)

// Options configure the agent-sandbox backend. The zero value claims from
// DefaultWarmPool in DefaultNamespace through a port-forward to the
// sandbox-router, using the kubeconfig from the environment.
type Options struct {
	// WarmPool is the SandboxWarmPool Open claims from; default
	// DefaultWarmPool. It must be in Namespace.
	WarmPool string
	// Namespace holds the warm pool, the claims and (in port-forward mode)
	// the sandbox-router-svc Service; default DefaultNamespace.
	Namespace string
	// Labels are added to every SandboxClaim this backend creates, next to
	// ManagedByLabel. Keys and values must be valid Kubernetes labels.
	Labels map[string]string

	// Connection mode: APIURL wins over GatewayName; with neither, the SDK
	// port-forwards to sandbox-router-svc in Namespace (needs pods/portforward
	// rights).
	//
	// APIURL is the router's base URL (http or https), for callers that can
	// reach it directly (in-cluster, an Ingress, `kubectl port-forward`).
	APIURL string
	// GatewayName names a Gateway (gateway.networking.k8s.io) fronting the
	// router; its address is discovered at Open.
	GatewayName string
	// GatewayNamespace is the Gateway's namespace; default "default".
	GatewayNamespace string

	// Connectivity says how commands reach the pod's sandboxd process API
	// (ConnectivityPortForward, the default; ConnectivityInClusterPodIP;
	// ConnectivityInClusterService; ConnectivityRouter). Gateway mode
	// allows only ConnectivityRouter. Without APIURL and GatewayName, the
	// in-cluster values also send file calls straight to the pod.
	Connectivity string
	// ProcessGRPCPort and ProcessRESTPort are the pod ports of the sandboxd
	// gRPC ProcessService and REST API; defaults DefaultProcessGRPCPort and
	// DefaultProcessRESTPort.
	ProcessGRPCPort, ProcessRESTPort int
	// RuntimePort is the pod port of the runtime server, which a Session
	// sends a call's files to in one request (its /unpack), over the same
	// route as the sandboxd API; default DefaultRuntimePort. With
	// ConnectivityRouter files go as an uploaded tar that tar unpacks.
	RuntimePort int

	// ClaimTTL, when positive, makes every claim expire: its
	// spec.lifecycle.shutdownTime is set to now+ClaimTTL (shutdownPolicy
	// Delete) and pushed forward every ClaimTTL/3 while the sandbox is open
	// in this process, so an open sandbox never expires and one whose
	// process died (or that was Disconnected and not reattached) is
	// deleted by the controller about ClaimTTL later. Zero: claims live
	// until Close. At least 30 s.
	ClaimTTL time.Duration

	// Kubeconfig is a kubeconfig file path. Empty means in-cluster config,
	// then $KUBECONFIG or ~/.kube/config. Ignored when RestConfig or
	// K8sHelper is set.
	Kubeconfig string
	// RestConfig overrides Kubeconfig. Ignored when K8sHelper is set.
	RestConfig *rest.Config
	// K8sHelper supplies pre-built clients (tests use fake clientsets).
	K8sHelper *sandbox.K8sHelper
	// HTTPTransport overrides the transport for requests to the router.
	HTTPTransport http.RoundTripper

	// ReadyTimeout bounds how long Open and Attach wait for the claim's
	// sandbox to become ready; default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// MaxExecTimeout is the longest ExecRequest.Timeout Exec accepts, and
	// (plus a grace) how long one HTTP request to the router may wait for
	// its answer; default DefaultMaxExecTimeout. The router's
	// --proxy-timeout must be at least this plus 15 s.
	MaxExecTimeout time.Duration

	// SnapshotDir is the directory snapshots are kept in
	// (goruntime.SnapshotBackend): for a replicated front end, a volume
	// every replica mounts (manifests/snapshot-store, docs/kubernetes.md
	// "Snapshots"), so a snapshot taken through one replica opens through
	// another. Empty: snapshots are refused.
	SnapshotDir string
	// SnapshotBytes caps what all the snapshots in SnapshotDir hold
	// together: past it a snapshot fails with an error wrapping
	// goruntime.ErrSnapshotQuota. Default DefaultSnapshotBytes.
	SnapshotBytes int64

	// Logger receives the backend's and the SDK's logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Mode names how the backend reaches the router: "direct", "gateway" or
// "port-forward".
func (o Options) Mode() string {
	switch {
	case o.APIURL != "":
		return "direct"
	case o.GatewayName != "":
		return "gateway"
	default:
		return "port-forward"
	}
}

func (o Options) withDefaults() Options {
	if o.WarmPool == "" {
		o.WarmPool = DefaultWarmPool
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.GatewayNamespace == "" {
		o.GatewayNamespace = DefaultNamespace
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.MaxExecTimeout == 0 {
		o.MaxExecTimeout = DefaultMaxExecTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Connectivity == "" {
		o.Connectivity = ConnectivityPortForward
		if o.GatewayName != "" && o.APIURL == "" {
			o.Connectivity = ConnectivityRouter
		}
	}
	if o.ProcessGRPCPort == 0 {
		o.ProcessGRPCPort = DefaultProcessGRPCPort
	}
	if o.ProcessRESTPort == 0 {
		o.ProcessRESTPort = DefaultProcessRESTPort
	}
	if o.RuntimePort == 0 {
		o.RuntimePort = DefaultRuntimePort
	}
	if o.SnapshotBytes <= 0 {
		o.SnapshotBytes = DefaultSnapshotBytes
	}
	o.Labels = maps.Clone(o.Labels)
	return o
}

// validate reports bad options the SDK would not name clearly.
func (o Options) validate() error {
	if errs := validation.IsDNS1123Subdomain(o.WarmPool); len(errs) > 0 {
		return fmt.Errorf("warm pool name %q: %s", o.WarmPool, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if k == ManagedByLabel {
			return fmt.Errorf("label %q is set by the backend itself", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(o.Labels[k]); len(errs) > 0 {
			return fmt.Errorf("label %s value %q: %s", k, o.Labels[k], strings.Join(errs, "; "))
		}
	}
	if o.ReadyTimeout < 0 {
		return fmt.Errorf("ready timeout %s is negative", o.ReadyTimeout)
	}
	switch o.Connectivity {
	case ConnectivityPortForward, ConnectivityInClusterPodIP, ConnectivityInClusterService, ConnectivityRouter:
	default:
		return fmt.Errorf("connectivity %q: want %s, %s, %s or %s", o.Connectivity,
			ConnectivityPortForward, ConnectivityInClusterPodIP, ConnectivityInClusterService, ConnectivityRouter)
	}
	if o.Mode() == "gateway" && o.Connectivity != ConnectivityRouter {
		return fmt.Errorf("connectivity %q with a Gateway: Gateway mode reaches sandboxes only through the router (use connectivity %s)", o.Connectivity, ConnectivityRouter)
	}
	for _, p := range []int{o.ProcessGRPCPort, o.ProcessRESTPort} {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("process API port %d: want 1-65535", p)
		}
	}
	if o.ClaimTTL < 0 || (o.ClaimTTL > 0 && o.ClaimTTL < minClaimTTL) {
		return fmt.Errorf("claim TTL %s: want 0 (never expire) or at least %s", o.ClaimTTL, minClaimTTL)
	}
	if o.SnapshotDir != "" && !filepath.IsAbs(o.SnapshotDir) {
		return fmt.Errorf("snapshot directory %q: want an absolute path", o.SnapshotDir)
	}
	if o.MaxExecTimeout < 0 {
		return fmt.Errorf("max exec timeout %s is negative", o.MaxExecTimeout)
	}
	return nil
}
