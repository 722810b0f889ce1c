package agentsandbox

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned/typed/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// The SDK creates claims itself (with a generated name) and, when a claim
// never becomes ready, deletes it again before returning an error that no
// longer carries its name. claimsClient sits between the SDK and the
// extensions API: it adds our labels to every claim the SDK creates and
// reports the created name to a recorder carried in the context, so Open's
// errors can name the claim.

// claimsClient decorates the extensions client's SandboxClaims.
type claimsClient struct {
	extclient.ExtensionsV1beta1Interface
	labels map[string]string // never mutated after New
	ttl    time.Duration     // Options.ClaimTTL
}

func (c claimsClient) SandboxClaims(namespace string) extclient.SandboxClaimInterface {
	return labeledClaims{SandboxClaimInterface: c.ExtensionsV1beta1Interface.SandboxClaims(namespace), labels: c.labels, ttl: c.ttl}
}

type labeledClaims struct {
	extclient.SandboxClaimInterface
	labels map[string]string
	ttl    time.Duration
}

// Create adds the labels (the SDK's own keys win) and, with a TTL, the
// claim's shutdown time, and records the name.
func (l labeledClaims) Create(ctx context.Context, claim *extv1beta1.SandboxClaim, opts metav1.CreateOptions) (*extv1beta1.SandboxClaim, error) {
	claim = claim.DeepCopy()
	if l.ttl > 0 {
		claim.Spec.Lifecycle = &extv1beta1.Lifecycle{
			ShutdownTime:   &metav1.Time{Time: time.Now().Add(l.ttl).Truncate(time.Second)},
			ShutdownPolicy: extv1beta1.ShutdownPolicyDelete,
		}
	}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	for k, v := range l.labels {
		if _, ok := claim.Labels[k]; !ok {
			claim.Labels[k] = v
		}
	}
	created, err := l.SandboxClaimInterface.Create(ctx, claim, opts)
	if err == nil {
		if rec, ok := ctx.Value(claimRecorderKey{}).(*claimRecorder); ok {
			rec.set(created.Name)
		}
	}
	return created, err
}

type claimRecorderKey struct{}

// claimRecorder receives the name of the claim created under one context.
type claimRecorder struct {
	mu   sync.Mutex
	name string
}

func (r *claimRecorder) set(name string) {
	r.mu.Lock()
	r.name = name
	r.mu.Unlock()
}

func (r *claimRecorder) get() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.name
}

func withClaimRecorder(ctx context.Context) (context.Context, *claimRecorder) {
	rec := &claimRecorder{}
	return context.WithValue(ctx, claimRecorderKey{}, rec), rec
}
