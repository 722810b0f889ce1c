package agentsandbox

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// A port-forward cannot reach a gVisor (runsc) pod: the kubelet's
// port-forward dials localhost in the pod's network namespace, and gVisor's
// sockets live in its own network stack (google/gvisor#3811,
// kubernetes-sigs/agent-sandbox#158). Every command then fails with "error
// reading server preface: EOF". So with ConnectivityPortForward the backend
// looks at the runtime class of the pods it is about to use and refuses,
// before any claim or call, when it is gVisor's.

var runtimeClassResource = schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}

// namesGVisor reports whether a RuntimeClass name or handler is gVisor's:
// "gvisor" (GKE Sandbox, manifests/overlays/gvisor) or "runsc" (the
// containerd handler).
func namesGVisor(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "gvisor") || strings.Contains(s, "runsc")
}

// runsGVisor reports whether RuntimeClass class runs pods under gVisor: by
// its name, else by its handler when the RuntimeClass can be read (it is
// cluster-scoped; without the right to get it, the name decides).
func (b *Backend) runsGVisor(ctx context.Context, class string) bool {
	if class == "" {
		return false
	}
	if namesGVisor(class) {
		return true
	}
	if b.k8s.DynamicClient == nil {
		return false
	}
	rc, err := b.k8s.DynamicClient.Resource(runtimeClassResource).Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		return false
	}
	handler, _, _ := unstructured.NestedString(rc.Object, "handler")
	return namesGVisor(handler)
}

// checkRoute refuses ConnectivityPortForward for pods of RuntimeClass class
// when that is gVisor; what names where the class comes from (a template,
// a claim's sandbox). The error wraps goruntime.ErrUnavailable and names
// the connectivity to use instead.
func (b *Backend) checkRoute(ctx context.Context, what string, class *string) error {
	if b.opts.Connectivity != ConnectivityPortForward || class == nil || !b.runsGVisor(ctx, *class) {
		return nil
	}
	return fmt.Errorf("%s runs its pods under gVisor (runtimeClassName %s), which a port-forward cannot reach (connectivity %s; google/gvisor#3811): "+
		"set Options.Connectivity=%s from a caller on the pod network, or Options.Connectivity=%s from outside the cluster (commands through the sandbox-router: no streaming, stdin or signals; docs/kubernetes.md): %w",
		what, *class, ConnectivityPortForward, ConnectivityInClusterPodIP, ConnectivityRouter, goruntime.ErrUnavailable)
}

// checkTemplateRoute is checkRoute for the pods of template t.
func (b *Backend) checkTemplateRoute(ctx context.Context, t *extv1beta1.SandboxTemplate) error {
	return b.checkRoute(ctx, fmt.Sprintf("template %s/%s", b.opts.Namespace, t.Name), t.Spec.PodTemplate.Spec.RuntimeClassName)
}

// checkClaimRoute is checkRoute for the pod of an existing claim: its
// Sandbox's runtime class, or, while the claim names no Sandbox yet, its
// warm pool's template's. Only with ConnectivityPortForward does it read
// anything; what it cannot read is left to the SDK to report.
func (b *Backend) checkClaimRoute(ctx context.Context, c *extv1beta1.SandboxClaim) error {
	if b.opts.Connectivity != ConnectivityPortForward {
		return nil
	}
	ns := b.opts.Namespace
	what := fmt.Sprintf("claim %s/%s", ns, c.Name)
	if name := c.Status.SandboxStatus.Name; name != "" && b.k8s.AgentsClient != nil {
		sbx, err := b.k8s.AgentsClient.Sandboxes(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return b.checkRoute(ctx, what, sbx.Spec.PodTemplate.Spec.RuntimeClassName)
		}
	}
	wp, err := b.k8s.ExtensionsClient.SandboxWarmPools(ns).Get(ctx, c.Spec.WarmPoolRef.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	t, err := b.k8s.ExtensionsClient.SandboxTemplates(ns).Get(ctx, wp.Spec.TemplateRef.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return b.checkRoute(ctx, what, t.Spec.PodTemplate.Spec.RuntimeClassName)
}
