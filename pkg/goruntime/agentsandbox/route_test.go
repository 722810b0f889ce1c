package agentsandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakedynamic "k8s.io/client-go/dynamic/fake"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// setRuntimeClass gives the cluster's template pods of RuntimeClass class.
func (c *cluster) setRuntimeClass(t *testing.T, class string) {
	t.Helper()
	ctx := context.Background()
	tmpls := c.ext.ExtensionsV1beta1().SandboxTemplates(testNS)
	tmpl, err := tmpls.Get(ctx, DefaultTemplate, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Spec.PodTemplate.Spec.RuntimeClassName = &class
	if _, err := tmpls.Update(ctx, tmpl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runtimeClasses makes the cluster serve RuntimeClass objects (name ->
// handler) to the backend, as the node.k8s.io API does.
func (c *cluster) runtimeClasses(handlers map[string]string) {
	var objs []runtime.Object
	for name, handler := range handlers {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
			"metadata": map[string]any{"name": name}, "handler": handler,
		}})
	}
	c.helper.DynamicClient = fakedynamic.NewSimpleDynamicClient(runtime.NewScheme(), objs...)
}

func wantGVisorRefusal(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, goruntime.ErrUnavailable) {
		t.Fatalf("%s: err = %v, want ErrUnavailable refusing the port-forward to gVisor pods", op, err)
	}
	for _, want := range []string{"gVisor", "port-forward", ConnectivityInClusterPodIP, ConnectivityRouter, "google/gvisor#3811"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not name %q", op, err, want)
		}
	}
}

// TestPortForwardToGVisorRefusedBeforeClaim: with the default
// connectivity (a port-forward to the pod) and a template whose pods run
// under gVisor, Open and CreateHandle refuse before claiming, naming the
// connectivities that work; the other connectivities claim as usual.
func TestPortForwardToGVisorRefusedBeforeClaim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		class    string
		handlers map[string]string
		refused  bool
	}{
		{name: "gvisor by name", class: "gvisor", refused: true},
		{name: "runsc by name", class: "runsc", refused: true},
		{name: "gvisor by handler", class: "sandboxed", handlers: map[string]string{"sandboxed": "runsc"}, refused: true},
		{name: "other handler", class: "kata", handlers: map[string]string{"kata": "kata-qemu"}},
		{name: "class not readable", class: "kata"},
		{name: "no runtime class"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, clusterSetup{pool: true, template: true})
			if tc.class != "" {
				c.setRuntimeClass(t, tc.class)
			}
			c.runtimeClasses(tc.handlers)
			pf := newBackend(t, c, newRouter(t), func(o *Options) { o.Connectivity = ConnectivityPortForward })
			_, err := pf.Open(t.Context())
			if !tc.refused {
				if err != nil {
					t.Fatalf("Open with port-forward, runtime class %q: %v", tc.class, err)
				}
				return
			}
			wantGVisorRefusal(t, "Open", err)
			_, _, err = pf.CreateHandle(t.Context(), "alice", goruntime.HandleSpec{TTL: time.Hour})
			wantGVisorRefusal(t, "CreateHandle", err)
			if n := c.claimCount(t); n != 0 {
				t.Errorf("%d claims created for a route that cannot work", n)
			}
			for _, conn := range []string{ConnectivityInClusterPodIP, ConnectivityRouter} {
				b := newBackend(t, c, newRouter(t), func(o *Options) { o.Connectivity = conn })
				if _, err := b.Open(t.Context()); err != nil {
					t.Errorf("Open with connectivity %s under gVisor: %v", conn, err)
				}
			}
		})
	}
}

// TestAttachPortForwardToGVisorRefused: attaching with a port-forward
// backend to a claim whose sandbox runs under gVisor is refused before the
// first call, for plain claims and for handles.
func TestAttachPortForwardToGVisorRefused(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	podIP := newBackend(t, c, r, nil) // in-cluster-pod-ip
	sb, err := podIP.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h, hsb, err := podIP.CreateHandle(t.Context(), "alice", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []goruntime.Sandbox{sb, hsb} {
		if err := s.Disconnect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The template runs pods under gVisor, and the controller copied its
	// runtime class into each Sandbox.
	c.setRuntimeClass(t, "gvisor")
	sandboxes := c.agents.AgentsV1beta1().Sandboxes(testNS)
	list, err := sandboxes.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gvisor := "gvisor"
	for i := range list.Items {
		s := &list.Items[i]
		s.Spec.PodTemplate.Spec.RuntimeClassName = &gvisor
		if _, err := sandboxes.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pf := newBackend(t, c, r, func(o *Options) { o.Connectivity = ConnectivityPortForward })
	_, err = pf.Attach(t.Context(), sb.ID())
	wantGVisorRefusal(t, "Attach", err)
	_, _, err = pf.AttachHandle(t.Context(), "alice", h.ID)
	wantGVisorRefusal(t, "AttachHandle", err)

	// The same claims attach with a connectivity that reaches the pods.
	if s, err := podIP.Attach(t.Context(), sb.ID()); err != nil {
		t.Errorf("Attach with connectivity %s: %v", ConnectivityInClusterPodIP, err)
	} else if _, err := s.Exec(t.Context(), goruntime.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("Exec after Attach: %v", err)
	}
}
