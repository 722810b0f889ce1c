package agentsandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Claim is one SandboxClaim as Backend.ListClaims reports it.
type Claim struct {
	// Name is the claim's name, the sandbox ID Backend.Attach takes.
	Name string
	// Labels are the claim's labels (ManagedByLabel and Options.Labels
	// for claims this backend made).
	Labels map[string]string
	// Created is when the claim was made.
	Created time.Time
	// ShutdownTime is when the controller deletes the claim unless it is
	// renewed (Options.ClaimTTL); zero when it never expires.
	ShutdownTime time.Time
	// Sandbox names the Sandbox bound to the claim; empty before it is.
	Sandbox string
}

// ListClaims returns the SandboxClaims in Options.Namespace matching the
// label selector (Kubernetes syntax, e.g. "team=ml,env!=prod"); an empty
// selector means every claim this backend's kind made
// (ManagedByLabel=ManagedByValue). Sorted by name. Errors: a selector
// that does not parse, or the API call (wrapping goruntime.ErrUnavailable).
func (b *Backend) ListClaims(ctx context.Context, selector string) ([]Claim, error) {
	if selector == "" {
		selector = ManagedByLabel + "=" + ManagedByValue
	}
	if _, err := labels.Parse(selector); err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	ns := b.opts.Namespace
	list, err := b.k8s.ExtensionsClient.SandboxClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list claims in %s matching %q: %w: %w", ns, selector, goruntime.ErrUnavailable, err)
	}
	out := make([]Claim, 0, len(list.Items))
	for _, c := range list.Items {
		cl := Claim{Name: c.Name, Labels: c.Labels, Created: c.CreationTimestamp.Time, Sandbox: c.Status.SandboxStatus.Name}
		if lc := c.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil {
			cl.ShutdownTime = lc.ShutdownTime.Time
		}
		out = append(out, cl)
	}
	slices.SortFunc(out, func(a, b Claim) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// renewClaim sets claim id's shutdown time to now+ttl.
func (b *Backend) renewClaim(ctx context.Context, id string, ttl time.Duration) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"lifecycle": extv1beta1.Lifecycle{
		ShutdownTime:   &metav1.Time{Time: shutdownAfter(ttl)},
		ShutdownPolicy: extv1beta1.ShutdownPolicyDelete,
	}}})
	if err != nil {
		return err
	}
	_, err = b.k8s.ExtensionsClient.SandboxClaims(b.opts.Namespace).Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("renew claim %s/%s: %w", b.opts.Namespace, id, err)
	}
	return nil
}

// keepAlive renews claim id to now+ttl every `every` until the returned
// stop is called (Close, Disconnect). A failed renewal is logged and
// retried at the next tick; a period of ttl/3 leaves room for two misses.
func (b *Backend) keepAlive(id string, ttl, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := b.renewClaim(ctx, id, ttl); err != nil && ctx.Err() == nil {
					b.opts.Logger.Warn("claim renewal failed; it expires at its shutdown time unless a later renewal works",
						"claim", id, "namespace", b.opts.Namespace, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
