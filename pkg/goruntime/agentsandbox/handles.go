package agentsandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Durable handles (goruntime.HandleBackend). A handle is a SandboxClaim
// and nothing else: whatever process (any replica of a front end) can
// read the claims of Options.Namespace can serve it. The claim carries
//
//   - labels HandleLabel=<handle id> and HandleOwnerLabel=<the first 128
//     bits of the owner's SHA-256 in hex>, so a lookup selects only the
//     owner's own claims (another owner's ID matches nothing);
//   - each of the handle's labels as HandleLabelPrefix+key=value;
//   - annotations HandleOwnerAnnotation=<owner> and
//     HandleTTLAnnotation=<TTL in seconds>;
//   - spec.lifecycle.shutdownTime = last use + TTL, shutdownPolicy
//     Delete: the agent-sandbox controller deletes the claim (and its
//     pod) once the handle has been idle for its TTL, with no front end
//     running. It is pushed forward while the handle is attached (every
//     TTL/3) and set to now+TTL when it is released.

// Labels and annotations of a handle's claim.
const (
	HandleLabel           = "go-runtime-sandbox.dev/handle"
	HandleOwnerLabel      = "go-runtime-sandbox.dev/owner"
	HandleLabelPrefix     = "label.go-runtime-sandbox.dev/"
	HandleOwnerAnnotation = "go-runtime-sandbox.dev/owner"
	HandleTTLAnnotation   = "go-runtime-sandbox.dev/ttl-seconds"
)

var _ goruntime.HandleBackend = (*Backend)(nil)

// ownerKey is the label value naming owner.
func ownerKey(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:16])
}

// CreateHandle claims a sandbox from the warm pool for a new handle of
// owner.
func (b *Backend) CreateHandle(ctx context.Context, owner string, spec goruntime.HandleSpec) (goruntime.Handle, goruntime.Sandbox, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: create handle: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: create handle: %w", err)
	}
	files := ""
	if spec.FromSnapshot != "" {
		st, m, err := b.openSnapshot(owner, spec.FromSnapshot)
		if err != nil {
			return goruntime.Handle{}, nil, err
		}
		files = st.Files(m)
	}
	return b.createHandle(ctx, owner, spec, files)
}

// createHandle is CreateHandle, whose sandbox gets the files of the tar
// at files, when set, in one request (snapshot.go); if that fails, the
// claim is deleted.
func (b *Backend) createHandle(ctx context.Context, owner string, spec goruntime.HandleSpec, files string) (goruntime.Handle, goruntime.Sandbox, error) {
	var tarball *os.File
	if files != "" {
		f, err := os.Open(files)
		if err != nil {
			return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: create handle: read snapshot: %w", err)
		}
		defer f.Close()
		tarball = f
	}
	if err := b.preflight(ctx); err != nil {
		return goruntime.Handle{}, nil, err
	}
	id := goruntime.NewHandleID()
	ttl := max(spec.TTL.Truncate(time.Second), time.Second) // the claim keeps whole seconds
	extra := claimExtra{
		labels:      map[string]string{HandleLabel: id, HandleOwnerLabel: ownerKey(owner)},
		annotations: map[string]string{HandleOwnerAnnotation: owner, HandleTTLAnnotation: strconv.FormatInt(int64(ttl/time.Second), 10)},
		ttl:         ttl,
	}
	for k, v := range spec.Labels {
		extra.labels[HandleLabelPrefix+k] = v
	}
	rctx, rec := withClaimRecorder(context.WithValue(ctx, claimExtraKey{}, extra))
	sb, err := b.client.CreateSandbox(rctx, b.opts.WarmPool, b.opts.Namespace)
	if err != nil {
		return goruntime.Handle{}, nil, b.explainOpen(err, rec.get())
	}
	hs := b.holdHandle(sb, ttl)
	if tarball != nil {
		if err := hs.putFile(ctx, tarball, wire.SnapshotModeAdd); err != nil {
			_ = hs.Close(context.WithoutCancel(ctx))
			return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: create handle from snapshot %s: %w", spec.FromSnapshot, err)
		}
	}
	now := time.Now().UTC()
	h := goruntime.Handle{ID: id, Owner: owner, Labels: maps.Clone(spec.Labels), TTL: ttl, Created: now, LastUsed: now, Expires: now.Add(ttl)}
	return h, hs, nil
}

// findHandle returns owner's live claim for handle id, or
// goruntime.HandleNotFound.
func (b *Backend) findHandle(ctx context.Context, owner, id string) (*extv1beta1.SandboxClaim, goruntime.Handle, error) {
	if !goruntime.ValidHandleID(id) || goruntime.CheckOwner(owner) != nil {
		return nil, goruntime.Handle{}, goruntime.HandleNotFound(id)
	}
	list, err := b.k8s.ExtensionsClient.SandboxClaims(b.opts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: HandleLabel + "=" + id + "," + HandleOwnerLabel + "=" + ownerKey(owner)})
	if err != nil {
		return nil, goruntime.Handle{}, fmt.Errorf("agent-sandbox: find handle: list claims in %s: %w: %w", b.opts.Namespace, goruntime.ErrUnavailable, err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if h, ok := claimHandle(c, owner, time.Now()); ok && h.ID == id {
			return c, h, nil
		}
	}
	return nil, goruntime.Handle{}, goruntime.HandleNotFound(id)
}

// claimHandle reads the handle a claim carries; ok is false when the
// claim is not owner's live handle (another owner's, being deleted,
// past its shutdown time, missing an annotation).
func claimHandle(c *extv1beta1.SandboxClaim, owner string, now time.Time) (goruntime.Handle, bool) {
	if c.Annotations[HandleOwnerAnnotation] != owner || c.DeletionTimestamp != nil {
		return goruntime.Handle{}, false
	}
	secs, err := strconv.ParseInt(c.Annotations[HandleTTLAnnotation], 10, 64)
	lc := c.Spec.Lifecycle
	if err != nil || secs <= 0 || lc == nil || lc.ShutdownTime == nil || now.After(lc.ShutdownTime.Time) {
		return goruntime.Handle{}, false
	}
	ttl := time.Duration(secs) * time.Second
	labels := map[string]string{}
	for k, v := range c.Labels {
		if key, ok := strings.CutPrefix(k, HandleLabelPrefix); ok {
			labels[key] = v
		}
	}
	expires := lc.ShutdownTime.Time.UTC()
	return goruntime.Handle{ID: c.Labels[HandleLabel], Owner: owner, Labels: labels, TTL: ttl,
		Created: c.CreationTimestamp.Time.UTC(), LastUsed: expires.Add(-ttl), Expires: expires}, true
}

// AttachHandle renews owner's handle id and attaches to its sandbox.
func (b *Backend) AttachHandle(ctx context.Context, owner, id string) (goruntime.Handle, goruntime.Sandbox, error) {
	c, h, err := b.findHandle(ctx, owner, id)
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	if err := b.checkClaimRoute(ctx, c); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: attach handle %s: %w", id, err)
	}
	// Renew first, so a claim close to its shutdown time is not deleted
	// while we attach.
	if err := b.renewClaim(ctx, c.Name, h.TTL); err != nil {
		if k8serrors.IsNotFound(err) {
			return goruntime.Handle{}, nil, goruntime.HandleNotFound(id)
		}
		return goruntime.Handle{}, nil, fmt.Errorf("agent-sandbox: attach handle %s: %w", id, err)
	}
	sb, err := b.client.GetSandbox(ctx, c.Name, b.opts.Namespace)
	if err != nil {
		return goruntime.Handle{}, nil, b.explainTransport(fmt.Errorf("agent-sandbox: attach handle %s (claim %s): %w", id, c.Name, err))
	}
	now := time.Now().UTC()
	h.LastUsed, h.Expires = now, now.Add(h.TTL)
	return h, b.holdHandle(sb, h.TTL), nil
}

// ListHandles returns owner's live handles, oldest first.
func (b *Backend) ListHandles(ctx context.Context, owner string) ([]goruntime.Handle, error) {
	if goruntime.CheckOwner(owner) != nil {
		return nil, nil
	}
	list, err := b.k8s.ExtensionsClient.SandboxClaims(b.opts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: HandleLabel + "," + HandleOwnerLabel + "=" + ownerKey(owner)})
	if err != nil {
		return nil, fmt.Errorf("agent-sandbox: list handles in %s: %w: %w", b.opts.Namespace, goruntime.ErrUnavailable, err)
	}
	now := time.Now()
	var out []goruntime.Handle
	for i := range list.Items {
		if h, ok := claimHandle(&list.Items[i], owner, now); ok && goruntime.ValidHandleID(h.ID) {
			out = append(out, h)
		}
	}
	goruntime.SortHandles(out)
	return out, nil
}

// CountHandles returns how many live handles Options.Namespace holds, of
// every owner.
func (b *Backend) CountHandles(ctx context.Context) (int, error) {
	list, err := b.k8s.ExtensionsClient.SandboxClaims(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: HandleLabel})
	if err != nil {
		return 0, fmt.Errorf("agent-sandbox: count handles in %s: %w: %w", b.opts.Namespace, goruntime.ErrUnavailable, err)
	}
	now, n := time.Now(), 0
	for i := range list.Items {
		c := &list.Items[i]
		owner := c.Annotations[HandleOwnerAnnotation]
		if h, ok := claimHandle(c, owner, now); ok && owner != "" && goruntime.ValidHandleID(h.ID) {
			n++
		}
	}
	return n, nil
}

// DeleteHandle deletes the claim of owner's handle id (the controller
// then deletes its pod).
func (b *Backend) DeleteHandle(ctx context.Context, owner, id string) error {
	c, _, err := b.findHandle(ctx, owner, id)
	if err != nil {
		return err
	}
	// Every sandbox of it still open through this backend (each call
	// attached to it) stops renewing.
	for _, s := range b.heldFor(c.Name) {
		s.finish()
	}
	err = b.k8s.ExtensionsClient.SandboxClaims(b.opts.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{})
	switch {
	case k8serrors.IsNotFound(err):
		return goruntime.HandleNotFound(id)
	case err != nil:
		return fmt.Errorf("agent-sandbox: delete handle %s (claim %s): %w", id, c.Name, err)
	}
	return nil
}

// holdHandle registers a handle's open sandbox, its claim renewed while it
// is, and returns it as a handleSandbox.
func (b *Backend) holdHandle(sb *sandbox.Sandbox, ttl time.Duration) *handleSandbox {
	return &handleSandbox{Sandbox: b.hold(sb, ttl, true), ttl: ttl}
}

// handleSandbox is a handle's sandbox as CreateHandle and AttachHandle
// return it: Disconnect sets the claim's shutdown time to now+TTL (the
// TTL counts from this use), Close deletes the claim.
type handleSandbox struct {
	*Sandbox
	ttl time.Duration
}

func (s *handleSandbox) Disconnect(ctx context.Context) error {
	err := s.Sandbox.Disconnect(ctx)
	if rerr := s.b.renewClaim(context.WithoutCancel(ctx), s.id, s.ttl); rerr != nil && !k8serrors.IsNotFound(rerr) {
		err = errors.Join(err, rerr)
	}
	return err
}
