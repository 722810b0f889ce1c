package processnode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GCResource is one namespaced resource that orphan cleanup scans, both as
// a possible owner and as a possible dependent.
type GCResource struct {
	GVR  schema.GroupVersionResource
	Kind string
}

// DefaultGCResources covers the objects agent-sandbox's controller owns or
// is owned through: claims, warm pools and templates own Sandboxes (and
// network policies); Sandboxes own Pods, Services and PVCs.
func DefaultGCResources() []GCResource {
	agents := "agents.x-k8s.io"
	ext := "extensions.agents.x-k8s.io"
	return []GCResource{
		{schema.GroupVersionResource{Group: ext, Version: "v1beta1", Resource: "sandboxclaims"}, "SandboxClaim"},
		{schema.GroupVersionResource{Group: ext, Version: "v1beta1", Resource: "sandboxwarmpools"}, "SandboxWarmPool"},
		{schema.GroupVersionResource{Group: ext, Version: "v1beta1", Resource: "sandboxtemplates"}, "SandboxTemplate"},
		{schema.GroupVersionResource{Group: agents, Version: "v1beta1", Resource: "sandboxes"}, "Sandbox"},
		{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod"},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service"},
		{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim"},
		{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, "NetworkPolicy"},
	}
}

const (
	finalizerForeground = metav1.FinalizerDeleteDependents // "foregroundDeletion"
	finalizerOrphan     = metav1.FinalizerOrphanDependents // "orphan"
)

// collectGarbage does, every GCInterval, what kube-controller-manager's
// garbage collector would: delete objects all of whose owners are gone,
// finish foreground deletions once no dependents remain, and release
// dependents of orphaning deletions.
func (n *Node) collectGarbage(ctx context.Context) {
	t := time.NewTicker(n.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.gcOnce(ctx)
	}
}

type gcObject struct {
	res GCResource
	obj *unstructured.Unstructured
}

func (n *Node) gcOnce(ctx context.Context) {
	var all []gcObject
	exists := map[types.UID]bool{}
	byKind := map[schema.GroupKind]GCResource{}
	for _, r := range n.cfg.GCResources {
		byKind[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = r
		list, err := n.cfg.Dynamic.Resource(r.GVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			// A resource whose CRD is not installed yet has nothing to collect.
			if !apierrors.IsNotFound(err) && ctx.Err() == nil {
				n.log.Debug("gc list", "resource", r.GVR.String(), "err", err)
			}
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			all = append(all, gcObject{r, o})
			exists[o.GetUID()] = true
		}
	}
	for _, d := range all {
		if d.obj.GetDeletionTimestamp() != nil {
			n.finishDeletion(ctx, d, all)
			continue
		}
		if refs := d.obj.GetOwnerReferences(); len(refs) > 0 && n.ownersGone(ctx, d.obj, refs, exists, byKind) {
			n.gcDelete(ctx, d, "owners gone")
		}
	}
}

// ownersGone reports whether every owner of obj is known to be gone. An
// owner of a kind outside GCResources counts as present. A UID missing from
// the listing is confirmed with a GET, so that an owner created after the
// listing is not mistaken for a deleted one.
func (n *Node) ownersGone(ctx context.Context, obj *unstructured.Unstructured, refs []metav1.OwnerReference, exists map[types.UID]bool, byKind map[schema.GroupKind]GCResource) bool {
	for _, ref := range refs {
		if exists[ref.UID] {
			return false
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return false
		}
		r, ok := byKind[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
		if !ok {
			return false
		}
		owner, err := n.cfg.Dynamic.Resource(r.GVR).Namespace(obj.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil && owner.GetUID() == ref.UID {
			return false
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}

// finishDeletion handles an object being deleted with a garbage-collector
// finalizer: for foregroundDeletion it deletes the dependents and drops
// the finalizer once none is left; for orphan it removes the owner
// reference from each dependent, then drops the finalizer.
func (n *Node) finishDeletion(ctx context.Context, owner gcObject, all []gcObject) {
	fins := owner.obj.GetFinalizers()
	foreground, orphan := slices.Contains(fins, finalizerForeground), slices.Contains(fins, finalizerOrphan)
	if !foreground && !orphan {
		return
	}
	uid := owner.obj.GetUID()
	remaining := 0
	for _, d := range all {
		refs := d.obj.GetOwnerReferences()
		idx := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
		if idx < 0 {
			continue
		}
		if orphan {
			kept := slices.Delete(slices.Clone(refs), idx, idx+1)
			if err := n.patchMeta(ctx, d, map[string]any{"ownerReferences": kept}); err != nil {
				n.log.Warn("gc orphan dependent", "object", describe(d), "err", err)
				remaining++
			}
			continue
		}
		remaining++
		if d.obj.GetDeletionTimestamp() == nil {
			n.gcDelete(ctx, d, "owner deleted in foreground")
		}
	}
	if remaining > 0 {
		return
	}
	kept := slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == finalizerForeground || f == finalizerOrphan })
	if err := n.patchMeta(ctx, owner, map[string]any{"finalizers": kept}); err != nil {
		n.log.Warn("gc drop finalizer", "object", describe(owner), "err", err)
	}
}

func (n *Node) gcDelete(ctx context.Context, d gcObject, why string) {
	uid := d.obj.GetUID()
	policy := metav1.DeletePropagationBackground
	err := n.cfg.Dynamic.Resource(d.res.GVR).Namespace(d.obj.GetNamespace()).Delete(ctx, d.obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &policy,
	})
	switch {
	case err == nil:
		n.log.Info("gc deleted", "object", describe(d), "why", why)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		n.log.Warn("gc delete", "object", describe(d), "err", err)
	}
}

// patchMeta merge-patches metadata fields, guarded by the object's
// resourceVersion so a concurrent change is not overwritten.
func (n *Node) patchMeta(ctx context.Context, d gcObject, fields map[string]any) error {
	fields["resourceVersion"] = d.obj.GetResourceVersion()
	body, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = n.cfg.Dynamic.Resource(d.res.GVR).Namespace(d.obj.GetNamespace()).Patch(ctx, d.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch %s: %w", describe(d), err)
	}
	return nil
}

func describe(d gcObject) string {
	return strings.ToLower(d.res.Kind) + " " + d.obj.GetNamespace() + "/" + d.obj.GetName()
}
