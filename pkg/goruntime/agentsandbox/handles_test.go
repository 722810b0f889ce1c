package agentsandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// expireClaims stands in for the controller's lifecycle handling: every
// 100 ms it deletes the claims past their shutdown time (policy Delete).
func (c *cluster) expireClaims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			l, err := c.ext.ExtensionsV1beta1().SandboxClaims(testNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, cl := range l.Items {
				if lc := cl.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil && time.Now().After(lc.ShutdownTime.Time) {
					_ = c.ext.ExtensionsV1beta1().SandboxClaims(testNS).Delete(ctx, cl.Name, metav1.DeleteOptions{})
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestHandlesConformance(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	c.expireClaims(t)
	b := newBackend(t, c, newRouter(t), nil)
	if err := goruntimetest.CheckHandles(t.Context(), b, 2*time.Second, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The expired handle's claim goes when the (fake) controller next
	// looks: the backend already answers for it as gone.
	deadline := time.Now().Add(10 * time.Second)
	n := c.claimCount(t)
	for n != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		n = c.claimCount(t)
	}
	if n != 0 {
		t.Errorf("%d claims left 10 s after the check", n)
	}
}

// A handle lives in its claim: another backend (a second replica, a
// restarted front end) attaches to it by ID; the claim carries the owner,
// the labels and a shutdown time pushed forward by each use.
func TestHandleIsTheClaim(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	one, two := newBackend(t, c, r, nil), newBackend(t, c, r, nil)
	ctx := t.Context()
	h, sb, err := one.CreateHandle(ctx, "alice@example.com", goruntime.HandleSpec{TTL: time.Hour, Labels: map[string]string{"project": "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	claimName := sb.ID()
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	cl, ok := c.claim(t, claimName)
	if !ok {
		t.Fatalf("no claim %s", claimName)
	}
	if cl.Labels[HandleLabel] != h.ID || cl.Labels[HandleLabelPrefix+"project"] != "p1" || cl.Annotations[HandleOwnerAnnotation] != "alice@example.com" ||
		cl.Annotations[HandleTTLAnnotation] != "3600" || cl.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("claim labels %v annotations %v", cl.Labels, cl.Annotations)
	}
	if strings.Contains(strings.Join(mapValues(cl.Labels), " "), "alice") {
		t.Errorf("the owner's name is in a label (labels are selectable by anyone listing): %v", cl.Labels)
	}
	first := cl.Spec.Lifecycle.ShutdownTime.Time
	if d := time.Until(first); d < 59*time.Minute || d > time.Hour {
		t.Errorf("shutdown time %s from now, want the TTL (1h)", d)
	}
	time.Sleep(1100 * time.Millisecond) // shutdown times have whole seconds
	h2, sb2, err := two.AttachHandle(ctx, "alice@example.com", h.ID)
	if err != nil {
		t.Fatalf("attach from another backend: %v", err)
	}
	if h2.Labels["project"] != "p1" || h2.TTL != time.Hour {
		t.Errorf("attached handle %+v", h2)
	}
	if err := sb2.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	cl, _ = c.claim(t, claimName)
	if !cl.Spec.Lifecycle.ShutdownTime.Time.After(first) {
		t.Errorf("shutdown time %s not pushed past %s by a use", cl.Spec.Lifecycle.ShutdownTime.Time, first)
	}
	if _, _, err := two.AttachHandle(ctx, "bob", h.ID); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("another owner attached: %v", err)
	}
	if err := two.DeleteHandle(ctx, "alice@example.com", h.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.claim(t, claimName); ok {
		t.Errorf("claim %s left after DeleteHandle", claimName)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
