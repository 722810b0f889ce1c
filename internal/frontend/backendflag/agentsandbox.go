package backendflag

import (
	"flag"
	"fmt"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// registerAgentSandbox adds the agent-sandbox backend's flags to fs,
// bound to o, so front ends (cmd/demo, cmd/mcp-server) share one spelling:
// --warm-pool-name, --namespace, --label (repeatable key=value), --api-url,
// --gateway-name, --gateway-namespace, --kubeconfig, --ready-timeout,
// --max-exec-timeout, --snapshot-dir. Call it before fs.Parse; fields already set on o are
// the flags' defaults.
func registerAgentSandbox(fs *flag.FlagSet, o *agentsandbox.Options) {
	if o.WarmPool == "" {
		o.WarmPool = agentsandbox.DefaultWarmPool
	}
	if o.Namespace == "" {
		o.Namespace = agentsandbox.DefaultNamespace
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = agentsandbox.DefaultReadyTimeout
	}
	if o.MaxExecTimeout == 0 {
		o.MaxExecTimeout = agentsandbox.DefaultMaxExecTimeout
	}
	fs.StringVar(&o.WarmPool, sandboxWarmPoolFlag, o.WarmPool, "agent-sandbox: name of the SandboxWarmPool to claim sandboxes from")
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
	fs.Func("labels", "agent-sandbox: comma-separated key=value labels for every claim (adds to --label)", func(s string) error {
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return fmt.Errorf("want key=value[,key=value...], got %q", kv)
			}
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			o.Labels[k] = v
		}
		return nil
	})
	fs.DurationVar(&o.ClaimTTL, "claim-ttl", o.ClaimTTL, "agent-sandbox: claims expire this long after this process stops renewing them (it dies or disconnects); 0: never (default)")
	fs.StringVar(&o.Connectivity, "connectivity", o.Connectivity, "agent-sandbox: how commands reach the sandbox pod: port-forward (default), in-cluster-pod-ip, in-cluster-service, or router (legacy contract, no streaming)")
	fs.StringVar(&o.APIURL, "api-url", o.APIURL, "agent-sandbox: sandbox-router URL (direct mode; skips port-forward)")
	fs.StringVar(&o.GatewayName, "gateway-name", o.GatewayName, "agent-sandbox: Gateway in front of the router (gateway mode)")
	fs.StringVar(&o.GatewayNamespace, "gateway-namespace", o.GatewayNamespace, "agent-sandbox: namespace of --gateway-name (default \"default\")")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "agent-sandbox: kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "agent-sandbox: how long to wait for a claimed sandbox to become ready")
	fs.DurationVar(&o.MaxExecTimeout, "max-exec-timeout", o.MaxExecTimeout, "agent-sandbox: longest command timeout accepted")
	fs.StringVar(&o.SnapshotDir, "snapshot-dir", o.SnapshotDir, "agent-sandbox: directory snapshots and forks are kept in, shared by every replica of this front end (a ReadWriteMany volume: manifests/snapshot-store, docs/kubernetes.md \"Snapshots\"); empty: snapshots are refused")
}
