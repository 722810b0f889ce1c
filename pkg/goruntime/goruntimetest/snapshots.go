package goruntimetest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

var _ goruntime.SnapshotBackend = (*Backend)(nil)

// snapshot is a fake snapshot: its record and a copy of its sandbox's
// directory under the backend's root. The fake keeps the records in
// memory, counts no quota and copies whole directories; it keeps the
// contract's ownership, TTL (on the fake's clock) and refusal of a busy
// sandbox.
type snapshot struct {
	goruntime.Snapshot
	dir string
}

// fakeSandbox returns sb as the fake's sandbox.
func fakeSandbox(sb goruntime.Sandbox) (*Sandbox, error) {
	switch v := sb.(type) {
	case *Sandbox:
		return v, nil
	case *handleSandbox:
		return v.Sandbox, nil
	}
	return nil, fmt.Errorf("fake backend: %T is not a fake sandbox", sb)
}

// quiet fails, wrapping goruntime.ErrSandboxBusy, while s runs a command.
func (s *Sandbox) quiet() error {
	if err := s.gone("snapshot"); err != nil {
		return err
	}
	s.mu.Lock()
	n := len(s.running)
	s.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("fake sandbox %s runs %d commands: %w", s.id, n, goruntime.ErrSandboxBusy)
	}
	return nil
}

// copyInto replaces dst's contents with src's.
func copyInto(dst, src string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.CopyFS(dst, os.DirFS(src))
}

// Snapshot copies sb's directory.
func (b *Backend) Snapshot(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.SnapshotSpec) (goruntime.Snapshot, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("fake snapshot: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("fake snapshot: %w", err)
	}
	s, err := fakeSandbox(sb)
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	if err := s.quiet(); err != nil {
		return goruntime.Snapshot{}, err
	}
	now := b.now()
	snap := &snapshot{Snapshot: goruntime.Snapshot{ID: goruntime.NewHandleID(), Owner: owner, Labels: maps.Clone(spec.Labels),
		Created: now, Expires: now.Add(spec.TTL), Method: "copy"}}
	snap.dir = filepath.Join(b.root, "snapshots", snap.ID)
	if err := copyInto(snap.dir, s.dir); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("fake snapshot of %s: %w", s.id, err)
	}
	b.mu.Lock()
	if b.snapshots == nil {
		b.snapshots = map[string]*snapshot{}
	}
	b.snapshots[snap.ID] = snap
	b.mu.Unlock()
	return snap.Snapshot, nil
}

// findSnapshot returns owner's live snapshot id.
func (b *Backend) findSnapshot(owner, id string) (*snapshot, error) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	snap := b.snapshots[id]
	if snap == nil || snap.Owner != owner || !now.Before(snap.Expires) {
		return nil, goruntime.SnapshotNotFound(id)
	}
	return snap, nil
}

// OpenSnapshot opens a sandbox holding a copy of the snapshot.
func (b *Backend) OpenSnapshot(ctx context.Context, owner, id string) (goruntime.Sandbox, error) {
	snap, err := b.findSnapshot(owner, id)
	if err != nil {
		return nil, err
	}
	sb, err := b.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := copyInto(sb.(*Sandbox).dir, snap.dir); err != nil {
		_ = sb.Close(ctx)
		return nil, fmt.Errorf("fake open snapshot %s: %w", id, err)
	}
	return sb, nil
}

// Fork snapshots sb and opens spec.Count sandboxes from the copy.
func (b *Backend) Fork(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.ForkSpec) ([]goruntime.ForkResult, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("fake fork: %w", err)
	}
	snap, err := b.Snapshot(ctx, owner, sb, goruntime.SnapshotSpec{TTL: goruntime.MinHandleTTL})
	if err != nil {
		return nil, err
	}
	defer b.DeleteSnapshot(ctx, owner, snap.ID)
	out := make([]goruntime.ForkResult, spec.Count)
	for i := range out {
		r := &out[i]
		if spec.Handle != nil {
			hs := *spec.Handle
			hs.FromSnapshot = snap.ID
			r.Handle, r.Sandbox, r.Err = b.CreateHandle(ctx, owner, hs)
		} else {
			r.Sandbox, r.Err = b.OpenSnapshot(ctx, owner, snap.ID)
		}
	}
	return out, nil
}

// Restore replaces sb's directory with the snapshot's.
func (b *Backend) Restore(ctx context.Context, owner string, sb goruntime.Sandbox, id string) error {
	snap, err := b.findSnapshot(owner, id)
	if err != nil {
		return err
	}
	s, err := fakeSandbox(sb)
	if err != nil {
		return err
	}
	if err := s.quiet(); err != nil {
		return err
	}
	if err := copyInto(s.dir, snap.dir); err != nil {
		return fmt.Errorf("fake restore %s into %s: %w", id, s.id, err)
	}
	return nil
}

// ListSnapshots returns owner's live snapshots, oldest first.
func (b *Backend) ListSnapshots(ctx context.Context, owner string) ([]goruntime.Snapshot, error) {
	now := b.now()
	b.mu.Lock()
	var out []goruntime.Snapshot
	for _, snap := range b.snapshots {
		if snap.Owner == owner && now.Before(snap.Expires) {
			out = append(out, snap.Snapshot)
		}
	}
	b.mu.Unlock()
	goruntime.SortSnapshots(out)
	return out, nil
}

// DeleteSnapshot deletes owner's snapshot id.
func (b *Backend) DeleteSnapshot(ctx context.Context, owner, id string) error {
	snap, err := b.findSnapshot(owner, id)
	if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.snapshots, id)
	b.mu.Unlock()
	return os.RemoveAll(snap.dir)
}
