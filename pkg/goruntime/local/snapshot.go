package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
)

// Snapshots (goruntime.SnapshotBackend). A snapshot holds the sandbox's
// files (snapcopy.go says which and how they leave it) and is kept by the
// store under StateDir/snapshots (pkg/goruntime/internal/snapshotstore): it outlives the
// process, ends at its TTL, counts against Options.SnapshotBytes, and is
// owned as handles are. As root with disks of their own, a snapshot is a
// sealed tree and the sandboxes made from it are layered on it,
// copy-on-write (method overlay, snapcow.go; pool sandboxes layered in
// place, snappool.go); elsewhere it is a tar copied into each (method
// copy). Either way a snapshot costs what the
// sandbox added (its /app, module cache and build cache over the seed)
// once; a fork costs that again only with the copy
// (docs/local-backend.md, "Snapshots and forks").

var _ goruntime.SnapshotBackend = (*Backend)(nil)

// forkParallel bounds the forks one Fork opens at once.
const forkParallel = 4

// snapshotter is the backend's snapshot work behind the
// goruntime.SnapshotBackend methods, which stay *Backend's: the store,
// taking files out of a sandbox and opening sandboxes from them (here),
// the layered trees (snapcow.go) and the pool sandboxes layered in place
// (snappool.go).
type snapshotter struct{ b *Backend }

// snap is b's snapshot work.
func (b *Backend) snap() snapshotter { return snapshotter{b: b} }

func (sn snapshotter) snapshots() snapshot.Store {
	b := sn.b
	return snapshot.Store{Root: stateDir(b.opts.StateDir).snapshots(), Quota: b.opts.SnapshotBytes, OwnerQuota: b.opts.SnapshotBytesPerOwner, Live: sn.sandboxExists}
}

// sandboxExists reports whether the sandbox id has its directory: it
// has not been closed (nor pruned once dead).
func (sn snapshotter) sandboxExists(id string) bool {
	b := sn.b
	_, err := os.Lstat(filepath.Join(b.sandboxes, filepath.Base(id)))
	return err == nil
}

// own returns sb as a local sandbox (of this backend or another: a
// snapshot moves files, whichever backend started the sandbox).
func (sn snapshotter) own(sb goruntime.Sandbox) (*Sandbox, error) {
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

// takeQuiet copies s's files into t while nothing runs in s.
func (sn snapshotter) takeQuiet(ctx context.Context, s *Sandbox, t *snapshot.Temp) error {
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
	s, err := b.snap().own(sb)
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	st := b.snap().snapshots()
	t, err := b.snap().newTemp()
	if err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot: %w", err)
	}
	defer t.Remove()
	if err := b.snap().takeInto(ctx, s, t); err != nil {
		return goruntime.Snapshot{}, err
	}
	now := time.Now().UTC()
	m, err := st.Commit(t, snapshot.Meta{Owner: owner, Labels: maps.Clone(spec.Labels), Created: now, Expires: now.Add(spec.TTL),
		Method: b.snap().snapshotMethod(), Source: s.meta.ID})
	if errors.Is(err, snapshot.ErrQuota) {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot of %s: %w (Options.SnapshotBytes): %w", s.meta.ID, err, goruntime.ErrSnapshotQuota)
	}
	if err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("local backend: snapshot of %s: %w", s.meta.ID, err)
	}
	b.opts.Logger.InfoContext(ctx, "local sandbox snapshot taken", "snapshot", m.ID, "sandbox", s.meta.ID, "bytes", m.Bytes, "method", m.Method)
	return m.Snapshot(), nil
}

// openSnapshot returns owner's snapshot id, or the not-found error.
func (sn snapshotter) openSnapshot(owner, id string) (snapshot.Meta, error) {
	m, err := sn.snapshots().Open(owner, id)
	if err != nil {
		return m, fmt.Errorf("local backend: %w", goruntime.SnapshotNotFound(id))
	}
	return m, nil
}

// OpenSnapshot opens a new sandbox holding the files of owner's snapshot
// id.
func (b *Backend) OpenSnapshot(ctx context.Context, owner, id string) (goruntime.Sandbox, error) {
	m, err := b.snap().openSnapshot(owner, id)
	if err != nil {
		return nil, err
	}
	return b.snap().openFrom(ctx, m)
}

// openFrom opens a sandbox holding m's files: layered on its tree (a
// pool sandbox layered in place, or a layered start: openLayered), or
// opened as Open does and filled from its files (the tar is opened
// first, so it stays readable should the snapshot be deleted meanwhile).
func (sn snapshotter) openFrom(ctx context.Context, m snapshot.Meta) (goruntime.Sandbox, error) {
	b := sn.b
	if m.Method == snapshot.MethodOverlay && sn.layersSnapshots() {
		return sn.openLayered(ctx, m) // snappool.go
	}
	r, err := sn.snapshotFiles(ctx, m)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sb, err := b.Open(ctx)
	if err != nil {
		return nil, err
	}
	s, err := sn.own(sb)
	if err == nil {
		err = s.put(ctx, r, false)
	}
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return sb, nil
}

// Fork opens spec.Count sandboxes holding sb's files as they are now: it
// takes them once (while nothing runs in sb), then opens the forks,
// forkParallel at a time, each from that. Layered (snapcow.go), the
// files are a hidden snapshot of owner's, counted against the quota
// while a fork lives; copied, a transient tar that counts against no
// snapshot quota but must fit it.
func (b *Backend) Fork(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.ForkSpec) ([]goruntime.ForkResult, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	s, err := b.snap().own(sb)
	if err != nil {
		return nil, err
	}
	st := b.snap().snapshots()
	t, err := b.snap().newTemp()
	if err != nil {
		return nil, fmt.Errorf("local backend: fork: %w", err)
	}
	defer t.Remove()
	if err := b.snap().takeInto(ctx, s, t); err != nil {
		return nil, err
	}
	m := snapshot.Meta{Owner: owner, Method: snapshot.MethodCopy}
	if t.File == nil {
		hold, err := t.Hold()
		if err != nil {
			return nil, fmt.Errorf("local backend: fork of %s: %w", s.meta.ID, err)
		}
		now := time.Now().UTC()
		m, err = st.Commit(t, snapshot.Meta{Owner: owner, Created: now, Expires: now.Add(time.Hour), // it goes with its last fork, whatever its TTL
			Method: snapshot.MethodOverlay, Source: s.meta.ID, Hidden: true})
		if errors.Is(err, snapshot.ErrQuota) {
			return nil, fmt.Errorf("local backend: fork of %s: %w (Options.SnapshotBytes): %w", s.meta.ID, err, goruntime.ErrSnapshotQuota)
		}
		if err != nil {
			return nil, fmt.Errorf("local backend: fork of %s: %w", s.meta.ID, err)
		}
		// Once the forks are layered (or failed), they alone keep it.
		defer st.Release(m, hold)
	}
	out := make([]goruntime.ForkResult, spec.Count)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &out[i]
			r.Handle, r.Sandbox, r.Err = b.snap().forkOne(ctx, owner, spec, m, t)
			if r.Err != nil {
				r.Err = fmt.Errorf("local backend: fork %d of %d from %s: %w", i+1, spec.Count, s.meta.ID, r.Err)
			}
		})
	}
	wg.Wait()
	return out, nil
}

// forkOne opens one fork: layered on m's tree (openLayered; a handle is
// a layered start), or filled from the tar t.
func (sn snapshotter) forkOne(ctx context.Context, owner string, spec goruntime.ForkSpec, m snapshot.Meta, t *snapshot.Temp) (goruntime.Handle, goruntime.Sandbox, error) {
	b := sn.b
	if m.Method == snapshot.MethodOverlay {
		if spec.Handle != nil {
			return b.createHandle(withLower(ctx, m), owner, *spec.Handle, "")
		}
		sb, err := sn.openLayered(ctx, m) // snappool.go
		if err != nil {
			return goruntime.Handle{}, nil, err
		}
		return goruntime.Handle{}, sb, nil
	}
	if spec.Handle != nil {
		return b.createHandle(ctx, owner, *spec.Handle, t.Path())
	}
	f, err := os.Open(t.Path())
	if err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: read snapshot: %w", err)
	}
	defer f.Close()
	sb, err := b.Open(ctx)
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	s, err := sn.own(sb)
	if err == nil {
		err = s.put(ctx, f, false)
	}
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return goruntime.Handle{}, nil, err
	}
	return goruntime.Handle{}, sb, nil
}

// Restore rolls sb back to owner's snapshot id in place.
func (b *Backend) Restore(ctx context.Context, owner string, sb goruntime.Sandbox, id string) error {
	m, err := b.snap().openSnapshot(owner, id)
	if err != nil {
		return err
	}
	s, err := b.snap().own(sb)
	if err != nil {
		return err
	}
	const what = "restore a snapshot"
	before, err := s.quiet(ctx, what)
	if err != nil {
		return err
	}
	r, err := b.snap().snapshotFiles(ctx, m)
	if err != nil {
		return err
	}
	err = s.put(ctx, r, true)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("local backend: restore %s into %s (it may hold part of the snapshot: restore again): %w", id, s.meta.ID, err)
	}
	if err := s.stillQuiet(ctx, before, what); err != nil {
		return fmt.Errorf("local backend: restore %s into %s: a command ran meanwhile and may have seen or changed part of it: restore again: %w", id, s.meta.ID, err)
	}
	return nil
}

// ListSnapshots returns owner's live snapshots, oldest first.
func (b *Backend) ListSnapshots(ctx context.Context, owner string) ([]goruntime.Snapshot, error) {
	st := b.snap().snapshots()
	out, err := st.Snapshots(owner)
	if err != nil {
		return nil, fmt.Errorf("local backend: list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot deletes owner's snapshot id.
func (b *Backend) DeleteSnapshot(ctx context.Context, owner, id string) error {
	err := b.snap().snapshots().Delete(owner, id)
	if errors.Is(err, snapshot.ErrNotFound) {
		return fmt.Errorf("local backend: %w", goruntime.SnapshotNotFound(id))
	}
	if err != nil {
		return fmt.Errorf("local backend: delete snapshot %s: %w", id, err)
	}
	return nil
}
