//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestCRDsServerSideApplied checks that agent-sandbox's four CRDs, applied
// unchanged by server-side apply when the cluster started, are Established
// and owned by that apply, and that their schemas are enforced.
func TestCRDsServerSideApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{
		"sandboxes.agents.x-k8s.io",
		"sandboxclaims.extensions.agents.x-k8s.io",
		"sandboxtemplates.extensions.agents.x-k8s.io",
		"sandboxwarmpools.extensions.agents.x-k8s.io",
	} {
		crd, err := shared.c.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if !established {
			t.Errorf("CRD %s not Established: %v", name, conds)
		}
		applied := false
		for _, mf := range crd.GetManagedFields() {
			if mf.Manager == "e2e" && mf.Operation == metav1.ManagedFieldsOperationApply {
				applied = true
			}
		}
		if !applied {
			t.Errorf("CRD %s has no server-side apply entry by field manager e2e: %+v", name, crd.GetManagedFields())
		}
	}

	// The schema is enforced: spec.warmPoolRef is required on a claim.
	activate(t, runcTarget)
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
		"kind":       "SandboxClaim",
		"metadata":   map[string]any{"name": "no-warm-pool-ref", "namespace": runcTarget.ns},
		"spec":       map[string]any{},
	}}
	gvr := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	_, err := shared.c.Dynamic.Resource(gvr).Namespace(runcTarget.ns).Create(ctx, claim, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "warmPoolRef") {
		t.Errorf("claim without spec.warmPoolRef: got %v, want an Invalid error naming warmPoolRef", err)
	}
}

// TestManifestsBase applies manifests/base unchanged by server-side apply
// (through activate) and checks that it made the template and warm pool
// the backend's defaults name, and that applying it again changes nothing.
func TestManifestsBase(t *testing.T) {
	activate(t, runcTarget)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ext := extClient(t).ExtensionsV1beta1()
	tmpl, err := ext.SandboxTemplates(runcTarget.ns).Get(ctx, agentsandbox.DefaultTemplate, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("template %s (agentsandbox.DefaultTemplate) from manifests/base: %v", agentsandbox.DefaultTemplate, err)
	}
	wp, err := ext.SandboxWarmPools(runcTarget.ns).Get(ctx, agentsandbox.DefaultWarmPool, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("warm pool %s (agentsandbox.DefaultWarmPool) from manifests/base: %v", agentsandbox.DefaultWarmPool, err)
	}
	if wp.Spec.TemplateRef.Name != tmpl.Name {
		t.Errorf("warm pool %s uses template %q, want %q", wp.Name, wp.Spec.TemplateRef.Name, tmpl.Name)
	}
	rv := wp.ResourceVersion
	out, err := shared.c.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e", "-n", runcTarget.ns, "-k", filepath.Join(shared.repo, "manifests", "base"))
	if err != nil {
		t.Fatalf("re-apply manifests/base: %v\n%s", err, out)
	}
	wp2, err := ext.SandboxWarmPools(runcTarget.ns).Get(ctx, agentsandbox.DefaultWarmPool, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wp2.Generation != wp.Generation {
		t.Errorf("re-applying manifests/base changed the warm pool's spec (generation %d -> %d, resourceVersion %s -> %s)", wp.Generation, wp2.Generation, rv, wp2.ResourceVersion)
	}
}

// TestOverlaysServerDryRun renders every overlay under manifests/overlays,
// and manifests/router, and sends it to the API server as a server-side dry run, so admission and
// CRD validation check every object without creating anything.
func TestOverlaysServerDryRun(t *testing.T) {
	activate(t, runcTarget)
	dirs, err := filepath.Glob(filepath.Join(shared.repo, "manifests", "overlays", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var overlays []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "kustomization.yaml")); err == nil {
			overlays = append(overlays, d)
		}
	}
	if len(overlays) == 0 {
		t.Fatalf("no overlays with a kustomization.yaml under manifests/overlays")
	}
	// The router's own kustomization is checked the same way, and the
	// snapshot store's local volume (cluster-scoped).
	overlays = append(overlays, filepath.Join(shared.repo, "manifests", "router"), filepath.Join(shared.repo, "manifests", "snapshot-store", "local-pv"))
	for _, d := range overlays {
		t.Run(filepath.Base(d), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The same field manager as the base's apply: an overlay applied
			// over the base by the same user changes fields, not owners.
			out, err := shared.c.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--field-manager=e2e", "-n", runcTarget.ns, "-k", d)
			if err != nil {
				t.Fatalf("server-side dry run: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "(server dry run)") {
				t.Errorf("kubectl did not report a server dry run:\n%s", out)
			}
			t.Logf("%s", out)
		})
	}

	// The dry run does reach validation: a claim with no warm pool is refused.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := filepath.Join(t.TempDir(), "bad-claim.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata:\n  name: bad\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := shared.c.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "-n", runcTarget.ns, "-f", bad); err == nil {
		t.Errorf("server dry run accepted an invalid claim:\n%s", out)
	}
}
