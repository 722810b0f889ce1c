package agentsandbox

import (
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
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

	// routerService is the Service the SDK port-forwards to; its name is
	// fixed by agent-sandbox.
	routerService = "sandbox-router-svc"
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

	// Logger receives the backend's and the SDK's logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// RegisterFlags adds the backend's flags to fs, bound to o, so front ends
// (cmd/demo, cmd/mcp-server) share one spelling:
// --warm-pool, --namespace, --label (repeatable key=value), --api-url,
// --gateway-name, --gateway-namespace, --kubeconfig, --ready-timeout,
// --max-exec-timeout. Call it before fs.Parse; fields already set on o are
// the flags' defaults.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	if o.WarmPool == "" {
		o.WarmPool = DefaultWarmPool
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.MaxExecTimeout == 0 {
		o.MaxExecTimeout = DefaultMaxExecTimeout
	}
	fs.StringVar(&o.WarmPool, "warm-pool", o.WarmPool, "agent-sandbox: SandboxWarmPool to claim sandboxes from")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "agent-sandbox: namespace of the warm pool and claims")
	fs.Func("label", "agent-sandbox: key=value label for every claim (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("want key=value, got %q", s)
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[k] = v
		return nil
	})
	fs.StringVar(&o.APIURL, "api-url", o.APIURL, "agent-sandbox: sandbox-router URL (direct mode; skips port-forward)")
	fs.StringVar(&o.GatewayName, "gateway-name", o.GatewayName, "agent-sandbox: Gateway in front of the router (gateway mode)")
	fs.StringVar(&o.GatewayNamespace, "gateway-namespace", o.GatewayNamespace, "agent-sandbox: namespace of --gateway-name (default \"default\")")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "agent-sandbox: kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "agent-sandbox: how long to wait for a claimed sandbox to become ready")
	fs.DurationVar(&o.MaxExecTimeout, "max-exec-timeout", o.MaxExecTimeout, "agent-sandbox: longest command timeout accepted")
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
	if o.MaxExecTimeout < 0 {
		return fmt.Errorf("max exec timeout %s is negative", o.MaxExecTimeout)
	}
	return nil
}
