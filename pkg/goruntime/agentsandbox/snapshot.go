package agentsandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
)

// Snapshots (goruntime.SnapshotBackend). A pod's files leave it as one
// tar its runtime server streams (GET /snapshot: /app, GOPATH, and what
// the sandbox added to the module and build caches since the pod
// started; refused while anything runs in it; docs/sandbox-server.md,
// "Snapshots") over the route commands take (Options.Connectivity, to
// Options.RuntimePort), into a store on a directory of the host's
// (Options.SnapshotDir), which the replicas of a front end share as a
// volume (docs/kubernetes.md, "Snapshots"): the store keeps ownership,
// TTL and the total quota (Options.SnapshotBytes) the local backend's
// snapshots keep, with the same code (internal/snapshotstore). A
// snapshot goes into a pod the same way, as one request (POST
// /snapshot): into a freshly claimed pod for OpenSnapshot, each fork
// and a handle made from a snapshot, into the pod itself for Restore.
// The tar is never parsed on the host: it is bytes from a sandbox, kept
// within the quota and handed to a sandbox of the same owner.

var _ goruntime.SnapshotBackend = (*Backend)(nil)

// snapshotMethod names how this backend takes snapshots.
const snapshotMethod = "stream"

// forkParallel bounds the pods one Fork claims and fills at once.
const forkParallel = 4

// snapshots returns the store, or an error when Options.SnapshotDir is
// not set.
func (b *Backend) snapshots() (snapshotstore.Store, error) {
	if b.opts.SnapshotDir == "" {
		return snapshotstore.Store{}, errors.New("agent-sandbox: snapshots need a directory every replica shares (Options.SnapshotDir; see docs/kubernetes.md, \"Snapshots\")")
	}
	return snapshotstore.Store{Root: b.opts.SnapshotDir, Quota: b.opts.SnapshotBytes}, nil
}

// own returns sb as a sandbox of this kind (of this backend or
// another: a snapshot moves files, whichever backend claimed the pod).
func (b *Backend) own(sb goruntime.Sandbox) (*Sandbox, error) {
	var s *Sandbox
	switch v := sb.(type) {
	case *Sandbox:
		s = v
	case *handleSandbox:
		s = v.Sandbox
	}
	if s == nil {
		return nil, fmt.Errorf("agent-sandbox: %T is not a sandbox of this backend", sb)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// snapshotRoute returns the client of s's runtime server, over the
// route commands take; ConnectivityRouter has none.
func (s *Sandbox) snapshotRoute(ctx context.Context, what string) (interface {
	TakeSnapshot(context.Context, io.Writer) error
	PutSnapshot(context.Context, io.Reader, string) error
}, error) {
	if s.proc == nil {
		return nil, fmt.Errorf("%s of sandbox %s: connectivity %q reaches the runtime server through the SDK only; snapshots need its own route (%s, %s or %s): %w",
			what, s.id, s.b.opts.Connectivity, ConnectivityPortForward, ConnectivityInClusterPodIP, ConnectivityInClusterService, errors.ErrUnsupported)
	}
	c, err := s.proc.filesClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s of sandbox %s: %w", what, s.id, err)
	}
	return c, nil
}

// take streams s's files, as one tar, into t.
func (s *Sandbox) take(ctx context.Context, t *snapshotstore.Temp) error {
	c, err := s.snapshotRoute(ctx, "snapshot")
	if err != nil {
		return err
	}
	err = c.TakeSnapshot(ctx, t)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, snapshotstore.ErrQuota):
		return fmt.Errorf("snapshot of sandbox %s: %w (Options.SnapshotBytes): %w", s.id, err, goruntime.ErrSnapshotQuota)
	}
	return s.explainSnapshot("snapshot", err)
}

// put writes the tar at path into s, in one request.
func (s *Sandbox) put(ctx context.Context, path, mode string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("agent-sandbox: read snapshot: %w", err)
	}
	defer f.Close()
	return s.putFile(ctx, f, mode)
}

func (s *Sandbox) putFile(ctx context.Context, f *os.File, mode string) error {
	what := "write a snapshot into"
	if mode == wire.SnapshotModeRestore {
		what = "restore"
	}
	c, err := s.snapshotRoute(ctx, what)
	if err != nil {
		return err
	}
	if err := c.PutSnapshot(ctx, f, mode); err != nil {
		return s.explainSnapshot(what, err)
	}
	return nil
}

// explainSnapshot names the sandbox in a snapshot call's error; a pod
// that cannot be reached is ErrSandboxGone, a pod whose server predates
// snapshots says to update its image.
func (s *Sandbox) explainSnapshot(what string, err error) error {
	var netErr net.Error
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return fmt.Errorf("%s sandbox %s: its pod's runtime server predates snapshots (update the runtime image; docs/kubernetes.md): %w", what, s.id, err)
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%s sandbox %s: %w: %w", what, s.id, goruntime.ErrSandboxGone, err)
	}
	return fmt.Errorf("%s sandbox %s: %w", what, s.id, err)
}

// takeTemp takes s's files into a new temporary tar of st.
func (b *Backend) takeTemp(ctx context.Context, st snapshotstore.Store, s *Sandbox) (*snapshotstore.Temp, error) {
	t, err := st.NewTemp()
	if err != nil {
		return nil, fmt.Errorf("agent-sandbox: snapshot: %w", err)
	}
	if err := s.take(ctx, t); err != nil {
		t.Remove()
		return nil, err
	}
	return t, nil
}

// Snapshot saves sb's files as a new snapshot of owner.
func (b *Backend) Snapshot(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.SnapshotSpec) (goruntime.Snapshot, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("agent-sandbox: snapshot: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("agent-sandbox: snapshot: %w", err)
	}
	st, err := b.snapshots()
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	s, err := b.own(sb)
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	start := time.Now()
	t, err := b.takeTemp(ctx, st, s)
	if err != nil {
		return goruntime.Snapshot{}, err
	}
	now := time.Now().UTC()
	m, err := st.Commit(t, snapshotstore.Meta{Owner: owner, Labels: maps.Clone(spec.Labels), Created: now, Expires: now.Add(spec.TTL),
		Method: snapshotMethod, Source: s.id})
	if errors.Is(err, snapshotstore.ErrQuota) {
		return goruntime.Snapshot{}, fmt.Errorf("agent-sandbox: snapshot of %s: %w (Options.SnapshotBytes): %w", s.id, err, goruntime.ErrSnapshotQuota)
	}
	if err != nil {
		return goruntime.Snapshot{}, fmt.Errorf("agent-sandbox: snapshot of %s: %w", s.id, err)
	}
	b.opts.Logger.InfoContext(ctx, "agent-sandbox snapshot taken", "snapshot", m.ID, "claim", s.id, "bytes", m.Bytes,
		"duration_ms", time.Since(start).Milliseconds())
	return m.Snapshot(), nil
}

// openSnapshot returns the store and owner's snapshot id, or the
// not-found error.
func (b *Backend) openSnapshot(owner, id string) (snapshotstore.Store, snapshotstore.Meta, error) {
	st, err := b.snapshots()
	if err != nil {
		return st, snapshotstore.Meta{}, err
	}
	m, err := st.Open(owner, id)
	if err != nil {
		return st, m, fmt.Errorf("agent-sandbox: %w", goruntime.SnapshotNotFound(id))
	}
	return st, m, nil
}

// OpenSnapshot claims a new sandbox and writes owner's snapshot id into
// it.
func (b *Backend) OpenSnapshot(ctx context.Context, owner, id string) (goruntime.Sandbox, error) {
	st, m, err := b.openSnapshot(owner, id)
	if err != nil {
		return nil, err
	}
	return b.openFilled(ctx, st.Files(m))
}

// openFilled claims a sandbox (as Open does) and writes the tar at path
// into it; the file is opened first, so it stays readable if its
// snapshot is deleted meanwhile.
func (b *Backend) openFilled(ctx context.Context, path string) (goruntime.Sandbox, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agent-sandbox: read snapshot: %w", err)
	}
	defer f.Close()
	sb, err := b.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := sb.(*Sandbox).putFile(ctx, f, wire.SnapshotModeAdd); err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return sb, nil
}

// Fork claims spec.Count sandboxes holding sb's files as they are now:
// it takes them once (while nothing runs in sb) into a transient tar
// that counts against no snapshot quota but must fit it, then claims the
// forks, forkParallel at a time, each filled from it in one request.
func (b *Backend) Fork(ctx context.Context, owner string, sb goruntime.Sandbox, spec goruntime.ForkSpec) ([]goruntime.ForkResult, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return nil, fmt.Errorf("agent-sandbox: fork: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("agent-sandbox: fork: %w", err)
	}
	st, err := b.snapshots()
	if err != nil {
		return nil, err
	}
	s, err := b.own(sb)
	if err != nil {
		return nil, err
	}
	t, err := b.takeTemp(ctx, st, s)
	if err != nil {
		return nil, err
	}
	defer t.Remove()
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
				r.Err = fmt.Errorf("agent-sandbox: fork %d of %d from %s: %w", i+1, spec.Count, s.id, r.Err)
			}
		})
	}
	wg.Wait()
	return out, nil
}

// Restore rolls sb back to owner's snapshot id in place, in one request:
// its server empties /app and GOPATH and writes the snapshot; the module
// and build caches keep their files and gain the snapshot's.
func (b *Backend) Restore(ctx context.Context, owner string, sb goruntime.Sandbox, id string) error {
	st, m, err := b.openSnapshot(owner, id)
	if err != nil {
		return err
	}
	s, err := b.own(sb)
	if err != nil {
		return err
	}
	if err := s.put(ctx, st.Files(m), wire.SnapshotModeRestore); err != nil {
		if errors.Is(err, goruntime.ErrSandboxBusy) {
			return fmt.Errorf("agent-sandbox: restore %s into %s: %w", id, s.id, err)
		}
		return fmt.Errorf("agent-sandbox: restore %s into %s (it may hold part of the snapshot: restore again): %w", id, s.id, err)
	}
	return nil
}

// ListSnapshots returns owner's live snapshots, oldest first.
func (b *Backend) ListSnapshots(ctx context.Context, owner string) ([]goruntime.Snapshot, error) {
	st, err := b.snapshots()
	if err != nil {
		return nil, err
	}
	out, err := st.Snapshots(owner)
	if err != nil {
		return nil, fmt.Errorf("agent-sandbox: list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot deletes owner's snapshot id.
func (b *Backend) DeleteSnapshot(ctx context.Context, owner, id string) error {
	st, err := b.snapshots()
	if err != nil {
		return err
	}
	err = st.Delete(owner, id)
	if errors.Is(err, snapshotstore.ErrNotFound) {
		return fmt.Errorf("agent-sandbox: %w", goruntime.SnapshotNotFound(id))
	}
	if err != nil {
		return fmt.Errorf("agent-sandbox: delete snapshot %s: %w", id, err)
	}
	return nil
}
