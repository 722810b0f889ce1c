package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
)

// Snapshots (goruntime.SnapshotBackend). A snapshot is a tar of the
// sandbox's files (snapcopy.go says which and how) kept by the store
// under StateDir/snapshots (pkg/goruntime/internal/snapshotstore): it outlives the process,
// ends at its TTL, counts against Options.SnapshotBytes, and is owned as
// handles are. The method is a copy ("copy"): bubblewrap 0.8 has no
// overlay option and a sandbox's /app is a directory on its disk, not an
// overlay layer, so nothing can be shared copy-on-write yet; a snapshot
// costs what the sandbox added (its /app, module cache and build cache
// over the seed), in time and in disk, and so does each fork
// (docs/local-backend.md, "Snapshots and forks").

var _ goruntime.SnapshotBackend = (*Backend)(nil)

// snapshotMethod names how this backend takes snapshots.
const snapshotMethod = "copy"

// forkParallel bounds the forks one Fork opens at once.
const forkParallel = 4

func (b *Backend) snapshots() snapshot.Store {
	return snapshot.Store{Root: stateDir(b.opts.StateDir).snapshots(), Quota: b.opts.SnapshotBytes}
}

// own returns sb as a local sandbox (of this backend or another: a
// snapshot moves files, whichever backend started the sandbox).
func (b *Backend) own(sb goruntime.Sandbox) (*Sandbox, error) {
	var s *Sandbox
	switch v := sb.(type) {
	case *Sandbox:
		s = v
	case *handleSandbox:
		s = v.Sandbox
	}
	if s == nil {
		return nil, fmt.Errorf("local backend: %T is not a local sandbox", sb)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	return s, nil
}

func snapshotOf(m snapshot.Meta) goruntime.Snapshot {
	return goruntime.Snapshot{ID: m.ID, Owner: m.Owner, Labels: maps.Clone(m.Labels), Created: m.Created.UTC(),
		Expires: m.Expires.UTC(), Bytes: m.Bytes, Method: m.Method}
}

// takeQuiet copies s's files into t while nothing runs in s.
func (b *Backend) takeQuiet(ctx context.Context, s *Sandbox, t *snapshot.Temp) error {
	const what = "take a snapshot"
	before, err := s.quiet(ctx, what)
	if err != nil {
		return err
	}
	if err := s.take(ctx, t); err != nil {
		if errors.Is(err, snapshot.ErrQuota) {
			return fmt.Errorf("local sandbox %s: %w (Options.SnapshotBytes): %w", s.meta.ID, err, goruntime.ErrSnapshotQuota)
		}
		return err
	}
	return s.stillQuiet(ctx, before, what)
}

// Snapshot saves sb's files as a new snapshot of owner.
func (b *Backend) Snapshot(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.SnapshotSpec) (goruntime.Snapshot, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot: %w", err)
	}
	s, err := b.own(sb)
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	st := b.snapshots()
	t, err := st.NewTemp()
	if err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot: %w", err)
	}
	defer t.Remove()
	if err := b.takeQuiet(ctx, s, t); err != nil {
		return goruntime.Snapshot{}, err
	}
	now := time.Now().UTC()
	m, err := st.Commit(t, snapshot.Meta{Owner: owner, Labels: maps.Clone(spec.Labels), Created: now, Expires: now.Add(spec.TTL),
		Method: snapshotMethod, Source: s.meta.ID})
	if errors.Is(err, snapshot.ErrQuota) {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot of %s: %w (Options.SnapshotBytes): %w", s.meta.ID, err, goruntime.ErrSnapshotQuota)
	}
	if err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot of %s: %w", s.meta.ID, err)
	}
	b.opts.Logger.InfoContext(ctx, "local sandbox snapshot taken", "snapshot", m.ID, "sandbox", s.meta.ID, "bytes", m.Bytes, "method", m.Method)
	return snapshotOf(m), nil
}

// openSnapshot returns owner's snapshot id, or the not-found error.
func (b *Backend) openSnapshot(owner, id string) (snapshot.Meta, error) {
	m, err := b.snapshots().Open(owner, id)
	if err != nil {
		return m, fmt.Errorf("local backend: %w", goruntime.SnapshotNotFound(id))
	}
	return m, nil
}

// putFile writes the tar at path into s.
func (b *Backend) putFile(ctx context.Context, s *Sandbox, path string, restore bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("local backend: read snapshot: %w", err)
	}
	defer f.Close()
	return s.put(ctx, f, restore)
}

// OpenSnapshot opens a new sandbox holding the files of owner's snapshot
// id.
func (b *Backend) OpenSnapshot(ctx context.Context, owner, id string) (goruntime.Sandbox, error) {
	m, err := b.openSnapshot(owner, id)
	if err != nil {
		return nil, err
	}
	return b.openFilled(ctx, b.snapshots().Files(m))
}

// openFilled opens a sandbox (as Open does) and writes the tar at path
// into it; the file stays readable even if its snapshot is deleted
// meanwhile, as it is opened first.
func (b *Backend) openFilled(ctx context.Context, path string) (goruntime.Sandbox, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("local backend: read snapshot: %w", err)
	}
	defer f.Close()
	sb, err := b.Open(ctx)
	if err != nil {
		return nil, err
	}
	s, err := b.own(sb)
	if err == nil {
		err = s.put(ctx, f, false)
	}
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return sb, nil
}

// Fork opens spec.Count sandboxes holding sb's files as they are now: it
// takes them once (while nothing runs in sb) into a transient tar that
// counts against no snapshot quota but must fit it, then opens the forks,
// forkParallel at a time, each filled from it.
func (b *Backend) Fork(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.ForkSpec) ([]goruntime.ForkResult, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	s, err := b.own(sb)
	if err != nil {
		return nil, err
	}
	t, err := b.snapshots().NewTemp()
	if err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	defer t.Remove()
	if err := b.takeQuiet(ctx, s, t); err != nil {
		return nil, err
	}
	out := make([]goruntime.ForkResult, spec.Count)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &out[i]
			if spec.Handle != nil {
				r.Handle, r.Sandbox, r.Err = b.createHandle(ctx, owner, *spec.Handle, t.Path())
			} else {
				r.Sandbox, r.Err = b.openFilled(ctx, t.Path())
			}
			if r.Err != nil {
				r.Err = fmt.Errorf("local backend: fork %d of %d from %s: %w", i+1, spec.Count, s.meta.ID, r.Err)
			}
		})
	}
	wg.Wait()
	return out, nil
}

// Restore rolls sb back to owner's snapshot id in place.
func (b *Backend) Restore(ctx context.Context, owner string, sb goruntime.Sandbox, id string) error {
	m, err := b.openSnapshot(owner, id)
	if err != nil {
		return err
	}
	s, err := b.own(sb)
	if err != nil {
		return err
	}
	const what = "restore a snapshot"
	before, err := s.quiet(ctx, what)
	if err != nil {
		return err
	}
	if err := b.putFile(ctx, s, b.snapshots().Files(m), true); err != nil {
		return fmt.Errorf("local backend: restore %s into %s (it may hold part of the snapshot: restore again): %w", id, s.meta.ID, err)
	}
	if err := s.stillQuiet(ctx, before, what); err != nil {
		return fmt.Errorf("local backend: restore %s into %s: a command ran meanwhile and may have seen or changed part of it: restore again: %w", id, s.meta.ID, err)
	}
	return nil
}

// ListSnapshots returns owner's live snapshots, oldest first.
func (b *Backend) ListSnapshots(ctx context.Context, owner string) ([]goruntime.Snapshot, error) {
	st := b.snapshots()
	if _, err := st.Prune(); err != nil {
		return nil, fmt.Errorf("local backend: list snapshots: %w", err)
	}
	ms, err := st.List(owner)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	out := make([]goruntime.Snapshot, 0, len(ms))
	for _, m := range ms {
		out = append(out, snapshotOf(m))
	}
	goruntime.SortSnapshots(out)
	return out, nil
}

// DeleteSnapshot deletes owner's snapshot id.
func (b *Backend) DeleteSnapshot(ctx context.Context, owner, id string) error {
	err := b.snapshots().Delete(owner, id)
	if errors.Is(err, snapshot.ErrNotFound) {
		return fmt.Errorf("local backend: %w", goruntime.SnapshotNotFound(id))
	}
	if err != nil {
		return fmt.Errorf("local backend: delete snapshot %s: %w", id, err)
	}
	return nil
}
