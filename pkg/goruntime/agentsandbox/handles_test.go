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

// letGo reports whether a handle's sandbox was let go of (Disconnect,
// Close, DeleteHandle, CloseAll): its claim renewal stopped.
func letGo(sb goruntime.Sandbox) bool {
	s := sb.(*handleSandbox).Sandbox
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Two calls may hold one handle at once, each its own attachment: the
// first one's release must not drop the second from what the backend
// holds, so CloseAll (shutdown) and DeleteHandle still let go of it.
// Before, the backend kept one entry per claim: the first release removed
// the second's, whose renewal then ran on after shutdown and delete.
func TestHandleHeldByTwoCalls(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	ctx := t.Context()
	h, sb, err := b.CreateHandle(ctx, "alice", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	attach := func() goruntime.Sandbox {
		t.Helper()
		_, s, err := b.AttachHandle(ctx, "alice", h.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Shutdown with the second call still attached.
	first, second := attach(), attach()
	if err := first.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if letGo(second) {
		t.Fatal("the first call's release let go of the second's attachment")
	}
	if err := b.CloseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if !letGo(second) {
		t.Fatal("CloseAll left the second call's attachment held (its claim renewal runs on)")
	}
	if _, ok := c.claim(t, sb.ID()); !ok {
		t.Fatal("CloseAll deleted a handle's claim; it should only release it")
	}

	// Delete with two calls attached ends both.
	first, second = attach(), attach()
	if err := first.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	third := attach()
	if err := b.DeleteHandle(ctx, "alice", h.ID); err != nil {
		t.Fatal(err)
	}
	if !letGo(second) || !letGo(third) {
		t.Fatalf("after DeleteHandle: second let go %v, third %v; want both", letGo(second), letGo(third))
	}
	if n := len(b.heldFor(sb.ID())); n != 0 {
		t.Errorf("%d attachments of the deleted handle still held", n)
	}
}

// A handle's claim cannot be attached by its name (Backend.Attach,
// mcp-server --claim): that would skip the owner check and renew it by
// Options.ClaimTTL instead of its own TTL (and Close would delete it).
// CountHandles counts every owner's live handles.
func TestHandleClaimNotAttachedByName(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	ctx := t.Context()
	h, sb, err := b.CreateHandle(ctx, "alice", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	claimName := sb.ID()
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	_, sbB, err := b.CreateHandle(ctx, "bob", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_ = sbB.Disconnect(ctx)
	if n, err := b.CountHandles(ctx); err != nil || n != 2 {
		t.Errorf("CountHandles = %d, %v; want 2 (alice's and bob's)", n, err)
	}
	before, _ := c.claim(t, claimName)
	if s, err := b.Attach(ctx, claimName); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		if s != nil {
			_ = s.Disconnect(ctx)
		}
		t.Fatalf("Attach(%s), a handle's claim by name: %v, want ErrSandboxNotFound", claimName, err)
	}
	after, ok := c.claim(t, claimName)
	if !ok || !after.Spec.Lifecycle.ShutdownTime.Equal(before.Spec.Lifecycle.ShutdownTime) {
		t.Errorf("the refused Attach changed the claim: shutdown %v -> %v (exists %v)", before.Spec.Lifecycle.ShutdownTime, after, ok)
	}
	if err := b.DeleteHandle(ctx, "alice", h.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.CountHandles(ctx); err != nil || n != 1 {
		t.Errorf("after a delete CountHandles = %d, %v; want 1", n, err)
	}
}
