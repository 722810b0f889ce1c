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
// claim's shutdown time, and records the name. A handle's create
// (claimExtra in ctx) adds its labels and annotations and its own TTL.
func (l labeledClaims) Create(ctx context.Context, claim *extv1beta1.SandboxClaim, opts metav1.CreateOptions) (*extv1beta1.SandboxClaim, error) {
	claim = claim.DeepCopy()
	ttl := l.ttl
	extra, _ := ctx.Value(claimExtraKey{}).(claimExtra)
	if extra.ttl > 0 {
		ttl = extra.ttl
	}
	if ttl > 0 {
		claim.Spec.Lifecycle = &extv1beta1.Lifecycle{
			ShutdownTime:   &metav1.Time{Time: shutdownAfter(ttl)},
			ShutdownPolicy: extv1beta1.ShutdownPolicyDelete,
		}
	}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	for _, ls := range []map[string]string{extra.labels, l.labels} {
		for k, v := range ls {
			if _, ok := claim.Labels[k]; !ok {
				claim.Labels[k] = v
			}
		}
	}
	if len(extra.annotations) > 0 && claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	for k, v := range extra.annotations {
		claim.Annotations[k] = v
	}
	created, err := l.SandboxClaimInterface.Create(ctx, claim, opts)
	if err == nil {
		if rec, ok := ctx.Value(claimRecorderKey{}).(*claimRecorder); ok {
			rec.set(created.Name)
		}
	}
	return created, err
}

// claimExtra is what a handle's create adds to its claim (handles.go).
type claimExtra struct {
	labels, annotations map[string]string
	ttl                 time.Duration
}

type claimExtraKey struct{}

// shutdownAfter is the claim shutdown time for a TTL from now, in whole
// seconds (the API keeps seconds).
func shutdownAfter(ttl time.Duration) time.Time {
	return time.Now().Add(ttl).Truncate(time.Second)
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
