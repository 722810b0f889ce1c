package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
)

// Durable handles (goruntime.HandleBackend). A handle is a file in the
// state directory, never only in a process's memory:
//
//	handles/<owner key>/<handle id>.json
//
// where the owner key is the first 128 bits of the owner's SHA-256 in
// hex, so an ID is looked up only among its owner's own files and a
// foreign ID is missing by construction. The file holds the record
// (handleRecord), written once; its modification time is the handle's
// last use, renewed (os.Chtimes) on attach and on release. A process
// that has the handle attached holds a shared flock on the file; a reaper
// takes an exclusive one without waiting, so it never ends a handle in
// use, and the kernel drops a killed holder's lock.
//
// A handle's sandbox is started with its runtime server's --idle-exit set
// to the handle's TTL and detached from its opener's lifeline at once: it
// outlives the process that made it, and ends on its own once idle for
// its TTL even when no process uses the state directory any more. Every
// backend on the state directory reaps expired handles and those whose
// sandbox ended (the record, the sandbox's processes, cgroup and files):
// at start-up, every handleReapEvery, and before each handle operation.

var _ goruntime.HandleBackend = (*Backend)(nil)

// CreateHandle starts a sandbox for a new handle of owner. The sandbox is
// started, not claimed from the warm pool: its server needs the handle's
// TTL as --idle-exit.
// With spec.FromSnapshot, the sandbox starts with that snapshot's files
// (an error wrapping goruntime.ErrSnapshotNotFound when owner has none of
// that ID).
func (b *Backend) CreateHandle(ctx context.Context, owner string, spec goruntime.HandleSpec) (_ goruntime.Handle, _ goruntime.Sandbox, err error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
	}
	files := ""
	if spec.FromSnapshot != "" {
		m, err := b.snap().openSnapshot(owner, spec.FromSnapshot)
		if err != nil {
			return goruntime.Handle{}, nil, err
		}
		if m.Method == snapshot.MethodOverlay && b.snap().layersSnapshots() {
			ctx = withLower(ctx, m) // snapcow.go
		} else if m.Method == snapshot.MethodOverlay {
			return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: snapshot %s is kept as a tree, which this backend does not layer sandboxes on", m.ID)
		} else {
			files = b.snap().snapshots().Files(m)
		}
	}
	return b.createHandle(ctx, owner, spec, files)
}

// createHandle is CreateHandle, whose sandbox starts with the files of
// the tar at files, when set (snapshot.go).
func (b *Backend) createHandle(ctx context.Context, owner string, spec goruntime.HandleSpec, files string) (_ goruntime.Handle, _ goruntime.Sandbox, err error) {
	var tarball *os.File
	if files != "" {
		if tarball, err = os.Open(files); err != nil {
			return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: read snapshot: %w", err)
		}
		defer tarball.Close()
	}
	b.handles.reap(ctx)
	s, err := b.open(ctx, nil, spec.TTL)
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}()
	if tarball != nil {
		if err := s.put(ctx, tarball, false); err != nil {
			return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
		}
	}
	rec := handleRecord{ID: goruntime.NewHandleID(), Owner: owner, Labels: maps.Clone(spec.Labels), TTL: spec.TTL,
		Created: time.Now().UTC(), Sandbox: s.meta.ID}
	dir := b.handles.ownerDir(owner)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
	}
	path := filepath.Join(dir, rec.ID+".json")
	if err := writeJSON(path, rec); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: write %s: %w", path, err)
	}
	lock, err := lockHandle(path)
	if err != nil {
		_ = os.Remove(path)
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
	}
	// From here the record names the sandbox; only now may it outlive
	// this process.
	if err := s.detach(); err != nil {
		lock.Close()
		_ = os.Remove(path)
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: %w", err)
	}
	fi, _ := lock.Stat()
	b.opts.Logger.InfoContext(ctx, "local sandbox handle created", "handle", rec.ID, "sandbox", s.meta.ID, "ttl", spec.TTL)
	return rec.handle(fi.ModTime()), &handleSandbox{Sandbox: s, path: path, lock: lock}, nil
}

// AttachHandle attaches to the sandbox of owner's handle id and renews it.
func (b *Backend) AttachHandle(ctx context.Context, owner, id string) (goruntime.Handle, goruntime.Sandbox, error) {
	b.handles.reap(ctx)
	path, rec, _, err := b.handles.read(owner, id)
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	lock, err := lockHandle(path)
	if err != nil {
		return goruntime.Handle{}, nil, goruntime.HandleNotFound(id)
	}
	// Reaped or deleted between the read and the lock?
	var st syscall.Stat_t
	fi, err := lock.Stat()
	if err != nil || syscall.Fstat(int(lock.Fd()), &st) != nil || st.Nlink == 0 || time.Now().After(fi.ModTime().Add(rec.TTL)) {
		lock.Close()
		return goruntime.Handle{}, nil, goruntime.HandleNotFound(id)
	}
	s, err := b.attach(ctx, rec.Sandbox)
	if err != nil {
		lock.Close()
		if errors.Is(err, goruntime.ErrSandboxNotFound) || errors.Is(err, goruntime.ErrSandboxGone) {
			// Its sandbox ended (idle past its TTL, killed): the handle
			// is gone with it.
			b.handles.reap(ctx)
			return goruntime.Handle{}, nil, goruntime.HandleNotFound(id)
		}
		return goruntime.Handle{}, nil, fmt.Errorf("local backend: attach handle %s: %w", id, err)
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
	return rec.handle(now), &handleSandbox{Sandbox: s, path: path, lock: lock}, nil
}

// ListHandles returns owner's live handles, oldest first.
func (b *Backend) ListHandles(ctx context.Context, owner string) ([]goruntime.Handle, error) {
	b.handles.reap(ctx)
	dir := b.handles.ownerDir(owner)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local backend: list handles: %w", err)
	}
	now := time.Now()
	var out []goruntime.Handle
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !goruntime.ValidHandleID(id) {
			continue
		}
		rec, fi, err := readHandleFile(filepath.Join(dir, e.Name()))
		if err != nil || rec.Owner != owner || now.After(fi.ModTime().Add(rec.TTL)) || !sandboxRuns(b.sandboxes, rec.Sandbox) {
			continue
		}
		out = append(out, rec.handle(fi.ModTime()))
	}
	goruntime.SortHandles(out)
	return out, nil
}

// CountHandles returns how many live handles the state directory holds,
// of every owner.
func (b *Backend) CountHandles(ctx context.Context) (int, error) {
	now, n := time.Now(), 0
	err := b.handles.each(func(rec handleRecord, fi os.FileInfo) bool {
		if !now.After(fi.ModTime().Add(rec.TTL)) && sandboxRuns(b.sandboxes, rec.Sandbox) {
			n++
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("local backend: count handles: %w", err)
	}
	return n, nil
}

// DeleteHandle ends the sandbox of owner's handle id and removes the
// handle, also while another process has it attached (its calls then
// fail with goruntime.ErrSandboxGone).
func (b *Backend) DeleteHandle(ctx context.Context, owner, id string) error {
	path, rec, _, err := b.handles.read(owner, id)
	if err != nil {
		return err
	}
	// Removing the file is the claim: of two deletes (or a delete and a
	// reaper) only one gets past it.
	if err := os.Remove(path); err != nil {
		return goruntime.HandleNotFound(id)
	}
	if err := b.destroy(ctx, rec.Sandbox); err != nil {
		return fmt.Errorf("local backend: delete handle %s: %w", id, err)
	}
	b.opts.Logger.InfoContext(ctx, "local sandbox handle deleted", "handle", id, "sandbox", rec.Sandbox)
	return nil
}

// handleSandbox is a handle's sandbox as CreateHandle and AttachHandle
// return it: it holds the handle's lock; Disconnect renews the handle and
// leaves the sandbox running, Close ends both.
type handleSandbox struct {
	*Sandbox
	path string
	lock *os.File
}

func (s *handleSandbox) Disconnect(ctx context.Context) error {
	now := time.Now()
	_ = os.Chtimes(s.path, now, now)
	err := s.Sandbox.Disconnect(ctx)
	s.lock.Close()
	return err
}

func (s *handleSandbox) Close(ctx context.Context) error {
	_ = os.Remove(s.path)
	err := s.Sandbox.Close(ctx)
	s.lock.Close()
	return err
}

// detach tells the sandbox's server to stop watching its lifeline: the
// sandbox no longer ends with this process (Disconnect does the same and
// also lets go of the sandbox).
func (s *Sandbox) detach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifeline == nil {
		return nil
	}
	_, err := s.lifeline.Write([]byte("detach\n"))
	s.lifeline.Close()
	s.lifeline = nil
	if err != nil {
		return fmt.Errorf("detach local sandbox %s from this process: %w", s.meta.ID, err)
	}
	return nil
}
