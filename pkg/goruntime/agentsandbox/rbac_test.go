package agentsandbox

import (
	"os"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	ktesting "k8s.io/client-go/testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The Role of manifests/mcp-server allows every Kubernetes call the
// backend and the SDK make for what mcp-server does with
// --connectivity=in-cluster-pod-ip: open and close a sandbox, and create,
// attach, list and delete handles. The fake controller's own calls
// (creating Sandboxes, updating claim status) are left out. The e2e runs
// the Role with RBAC enforced; this test covers paths the e2e does not take.
func TestMCPServerRoleCoversTheBackend(t *testing.T) {
	f, err := os.Open("../../../manifests/mcp-server/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var role rbacv1.Role
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&role); err != nil {
		t.Fatalf("role.yaml: %v", err)
	}
	allowed := func(a ktesting.Action) bool {
		res := a.GetResource()
		name := res.Resource
		if sub := a.GetSubresource(); sub != "" {
			name += "/" + sub
		}
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, res.Group) && slices.Contains(r.Resources, name) && slices.Contains(r.Verbs, a.GetVerb()) {
				return true
			}
		}
		return false
	}

	c := newCluster(t, clusterSetup{pool: true, template: true})
	c.ext.ClearActions() // the test's own pool and template
	c.agents.ClearActions()
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h, hs, err := b.CreateHandle(ctx, "alice", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	other := newBackend(t, c, r, nil) // another replica
	_, hs, err = other.AttachHandle(ctx, "alice", h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := hs.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ListHandles(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CountHandles(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteHandle(ctx, "alice", h.ID); err != nil {
		t.Fatal(err)
	}

	controller := func(a ktesting.Action) bool {
		res := a.GetResource().Resource
		return (res == "sandboxes" && a.GetVerb() == "create") || (res == "sandboxclaims" && a.GetSubresource() == "status")
	}
	seen := map[string]bool{}
	for _, a := range append(c.ext.Actions(), c.agents.Actions()...) {
		if controller(a) {
			continue
		}
		seen[a.GetVerb()+" "+a.GetResource().Resource] = true
		if !allowed(a) {
			t.Errorf("the backend called %s %s/%s (subresource %q), which role.yaml does not allow",
				a.GetVerb(), a.GetResource().Group, a.GetResource().Resource, a.GetSubresource())
		}
	}
	if !seen["patch sandboxclaims"] || !seen["create sandboxclaims"] || !seen["get sandboxes"] {
		t.Fatalf("calls recorded: %v; want at least create and patch of claims and get of sandboxes", seen)
	}
	t.Logf("calls: %v", seen)
	// The check sees a call the Role lacks.
	if allowed(ktesting.NewCreateAction(rbacv1.SchemeGroupVersion.WithResource("roles"), testNS, nil)) {
		t.Error("role.yaml allows creating roles")
	}
}
