package agentsandbox

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

func shutdownTime(t *testing.T, c *cluster, id string) time.Time {
	t.Helper()
	cl, ok := c.claim(t, id)
	if !ok {
		t.Fatalf("claim %s is gone", id)
	}
	if cl.Spec.Lifecycle == nil || cl.Spec.Lifecycle.ShutdownTime == nil {
		t.Fatalf("claim %s has no shutdown time: %+v", id, cl.Spec.Lifecycle)
	}
	if p := cl.Spec.Lifecycle.ShutdownPolicy; p != extv1beta1.ShutdownPolicyDelete {
		t.Fatalf("claim %s shutdown policy %q, want Delete", id, p)
	}
	return cl.Spec.Lifecycle.ShutdownTime.Time
}

func TestClaimTTLSetAndRenewed(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	ttl := 2 * time.Minute
	b := newBackend(t, c, r, func(o *Options) { o.ClaimTTL = ttl })
	b.renewEvery = 1100 * time.Millisecond // shutdown times have whole seconds
	ctx := t.Context()

	before := time.Now()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := shutdownTime(t, c, sb.ID())
	if first.Before(before.Add(ttl).Add(-time.Second)) || first.After(time.Now().Add(ttl)) {
		t.Fatalf("shutdown time %s, want about now+%s", first, ttl)
	}
	// While open, the claim is renewed.
	deadline := time.Now().Add(10 * time.Second)
	for !shutdownTime(t, c, sb.ID()).After(first) {
		if time.Now().After(deadline) {
			t.Fatalf("shutdown time still %s after 10 s open", first)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Disconnected, it is left to expire.
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	left := shutdownTime(t, c, sb.ID())
	time.Sleep(2500 * time.Millisecond)
	if now := shutdownTime(t, c, sb.ID()); !now.Equal(left) {
		t.Fatalf("a disconnected claim was renewed: %s -> %s", left, now)
	}
	// Attach renews at once.
	again, err := b.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	if now := shutdownTime(t, c, sb.ID()); !now.After(left) {
		t.Fatalf("Attach did not renew the claim: %s", now)
	}
}

func TestClaimWithoutTTLNeverExpires(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	sb, err := b.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cl, _ := c.claim(t, sb.ID()); cl.Spec.Lifecycle != nil {
		t.Fatalf("claim without ClaimTTL has lifecycle %+v", cl.Spec.Lifecycle)
	}
}

func TestListClaimsByLabel(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	ml := newBackend(t, c, r, func(o *Options) { o.Labels = map[string]string{"team": "ml", "env": "dev"} })
	web := newBackend(t, c, r, func(o *Options) { o.Labels = map[string]string{"team": "web"} })
	ctx := t.Context()
	var mlIDs []string
	for range 2 {
		sb, err := ml.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mlIDs = append(mlIDs, sb.ID())
	}
	webSB, err := web.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A claim someone else made, without our labels.
	if _, err := c.ext.ExtensionsV1beta1().SandboxClaims(testNS).Create(ctx, &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: testNS},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	names := func(sel string) []string {
		t.Helper()
		cls, err := ml.ListClaims(ctx, sel)
		if err != nil {
			t.Fatalf("ListClaims(%q): %v", sel, err)
		}
		var out []string
		for _, cl := range cls {
			out = append(out, cl.Name)
		}
		return out
	}
	eq := func(got, want []string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
	if got := names("team=ml"); !eq(got, mlIDs) {
		t.Errorf("team=ml: %v, want %v", got, mlIDs)
	}
	if got := names("team=web"); !eq(got, []string{webSB.ID()}) {
		t.Errorf("team=web: %v, want %v", got, []string{webSB.ID()})
	}
	if got := names(""); len(got) != 3 {
		t.Errorf("default selector (managed by us): %v, want the 3 claims we made", got)
	}
	if _, err := ml.ListClaims(ctx, "team in (("); err == nil {
		t.Error("a bad selector was accepted")
	}
	cls, err := ml.ListClaims(ctx, "team=ml,env=dev")
	if err != nil || len(cls) != 2 || cls[0].Labels[ManagedByLabel] != ManagedByValue || cls[0].Sandbox == "" {
		t.Errorf("team=ml,env=dev: %+v, %v", cls, err)
	}
}
