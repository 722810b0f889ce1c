package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
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

// handleReapEvery is how often a backend reaps expired handles.
const handleReapEvery = 10 * time.Second

// handleRecord is a handle's file.
type handleRecord struct {
	ID      string            `json:"id"`
	Owner   string            `json:"owner"`
	Labels  map[string]string `json:"labels,omitempty"`
	TTL     time.Duration     `json:"ttl_ns"`
	Created time.Time         `json:"created"`
	Sandbox string            `json:"sandbox"` // the sandbox's ID (sandboxes/<id>)
}

var _ goruntime.HandleBackend = (*Backend)(nil)

// ownerDir is the directory of owner's handle files.
func (b *Backend) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(stateDir(b.opts.StateDir).handles(), hex.EncodeToString(sum[:16]))
}

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
		m, err := b.openSnapshot(owner, spec.FromSnapshot)
		if err != nil {
			return goruntime.Handle{}, nil, err
		}
		if m.Method == snapshot.MethodOverlay && b.layersSnapshots() {
			ctx = withLower(ctx, m) // snapcow.go
		} else if m.Method == snapshot.MethodOverlay {
			return goruntime.Handle{}, nil, fmt.Errorf("local backend: create handle: snapshot %s is kept as a tree, which this backend does not layer sandboxes on", m.ID)
		} else {
			files = b.snapshots().Files(m)
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
	b.reapHandles(ctx)
	s, err := b.open(ctx, false, spec.TTL)
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
	dir := b.ownerDir(owner)
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

// lockHandle opens a handle's file and takes a shared lock on it: the
// handle is in use until the file is closed.
func lockHandle(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func (r handleRecord) handle(lastUsed time.Time) goruntime.Handle {
	lastUsed = lastUsed.UTC()
	return goruntime.Handle{ID: r.ID, Owner: r.Owner, Labels: maps.Clone(r.Labels), TTL: r.TTL,
		Created: r.Created, LastUsed: lastUsed, Expires: lastUsed.Add(r.TTL)}
}

// readHandle reads owner's handle id. Any failure (no such file, another
// owner's record, a file that is not one) is goruntime.HandleNotFound.
func (b *Backend) readHandle(owner, id string) (string, handleRecord, os.FileInfo, error) {
	if !goruntime.ValidHandleID(id) {
		return "", handleRecord{}, nil, goruntime.HandleNotFound(id)
	}
	path := filepath.Join(b.ownerDir(owner), id+".json")
	rec, fi, err := readHandleFile(path)
	if err != nil || rec.Owner != owner || rec.ID != id {
		return "", handleRecord{}, nil, goruntime.HandleNotFound(id)
	}
	return path, rec, fi, nil
}

func readHandleFile(path string) (handleRecord, os.FileInfo, error) {
	var rec handleRecord
	fi, err := os.Stat(path)
	if err != nil {
		return rec, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return rec, nil, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, nil, err
	}
	if !goruntime.ValidHandleID(rec.ID) || !sandboxid.Valid(rec.Sandbox) || rec.TTL <= 0 {
		return rec, nil, errors.New("not a handle record")
	}
	return rec, fi, nil
}

// AttachHandle attaches to the sandbox of owner's handle id and renews it.
func (b *Backend) AttachHandle(ctx context.Context, owner, id string) (goruntime.Handle, goruntime.Sandbox, error) {
	b.reapHandles(ctx)
	path, rec, _, err := b.readHandle(owner, id)
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
			b.reapHandles(ctx)
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
	b.reapHandles(ctx)
	dir := b.ownerDir(owner)
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
		if err != nil || rec.Owner != owner || now.After(fi.ModTime().Add(rec.TTL)) || !b.sandboxAlive(rec.Sandbox) {
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
	err := b.eachHandle(func(rec handleRecord, fi os.FileInfo) bool {
		if !now.After(fi.ModTime().Add(rec.TTL)) && b.sandboxAlive(rec.Sandbox) {
			n++
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("local backend: count handles: %w", err)
	}
	return n, nil
}

// handleOf reports whether sandbox id is a handle's (a record names it,
// live or not yet reaped).
func (b *Backend) handleOf(id string) bool {
	found := false
	_ = b.eachHandle(func(rec handleRecord, _ os.FileInfo) bool {
		found = rec.Sandbox == id
		return !found
	})
	return found
}

// eachHandle calls fn with every handle record in the state directory,
// of every owner, until fn returns false.
func (b *Backend) eachHandle(fn func(handleRecord, os.FileInfo) bool) error {
	root := stateDir(b.opts.StateDir).handles()
	owners, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, o := range owners {
		entries, _ := os.ReadDir(filepath.Join(root, o.Name()))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			rec, fi, err := readHandleFile(filepath.Join(root, o.Name(), e.Name()))
			if err == nil && !fn(rec, fi) {
				return nil
			}
		}
	}
	return nil
}

// DeleteHandle ends the sandbox of owner's handle id and removes the
// handle, also while another process has it attached (its calls then
// fail with goruntime.ErrSandboxGone).
func (b *Backend) DeleteHandle(ctx context.Context, owner, id string) error {
	path, rec, _, err := b.readHandle(owner, id)
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

// sandboxAlive reports whether sandbox id's processes run.
func (b *Backend) sandboxAlive(id string) bool {
	var m meta
	data, err := os.ReadFile(layout{dir: filepath.Join(b.sandboxes, id)}.meta())
	return err == nil && json.Unmarshal(data, &m) == nil && procfs.Alive(m.PID, m.StartTime)
}

// destroy ends sandbox id (live or dead) and removes what it left: its
// processes, cgroup, disk and directory.
func (b *Backend) destroy(ctx context.Context, id string) error {
	if !sandboxid.Valid(id) {
		return nil
	}
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	data, err := os.ReadFile(l.meta())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return tree.Remove(l.dir)
		}
		return err
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("sandbox %s: bad state file: %w", id, err)
	}
	if m.Disk != nil {
		l.disk = m.Disk.Dir
		l.memory = m.Disk.Memory
	}
	s := &Sandbox{b: b, l: l, meta: m, cl: l.client(serverUID(m.HostUID), b.opts.OutputBytes), keep: keepSet(m.Keep)}
	return s.Close(ctx)
}

// reapHandles ends the handles idle past their TTL, and forgets those
// whose sandbox ended, unless a process has them attached (a shared lock
// on the file).
func (b *Backend) reapHandles(ctx context.Context) {
	root := stateDir(b.opts.StateDir).handles()
	owners, _ := os.ReadDir(root)
	now := time.Now()
	for _, o := range owners {
		dir := filepath.Join(root, o.Name())
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			if strings.HasSuffix(e.Name(), ".tmp") {
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
					_ = os.Remove(path)
				}
				continue
			}
			rec, fi, err := readHandleFile(path)
			if err != nil {
				continue
			}
			expired := now.After(fi.ModTime().Add(rec.TTL))
			if !expired && b.sandboxAlive(rec.Sandbox) {
				continue
			}
			b.reapHandle(ctx, path, rec, expired)
		}
		_ = os.Remove(dir) // once empty
	}
}

// reapHandle removes one handle found expired or with its sandbox ended,
// unless it is attached.
func (b *Backend) reapHandle(ctx context.Context, path string, rec handleRecord, expired bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // attached: its holder renews it on release
	}
	// Renewed between the read and the lock?
	if fi, err := f.Stat(); err != nil || (expired && !time.Now().After(fi.ModTime().Add(rec.TTL))) {
		return
	}
	if os.Remove(path) != nil {
		return // another reaper or a delete got it
	}
	if err := b.destroy(context.WithoutCancel(ctx), rec.Sandbox); err != nil {
		b.opts.Logger.Warn("local sandbox handle: remove its sandbox", "handle", rec.ID, "sandbox", rec.Sandbox, "err", err)
	}
	why := "its sandbox ended"
	if expired {
		why = "idle past its TTL"
	}
	b.opts.Logger.Info("local sandbox handle reaped", "handle", rec.ID, "sandbox", rec.Sandbox, "why", why, "ttl", rec.TTL)
}

// runHandleReaper reaps handles at once and then every handleReapEvery
// until ctx ends (Backend.Close).
func (b *Backend) runHandleReaper(ctx context.Context) {
	t := time.NewTicker(handleReapEvery)
	defer t.Stop()
	for {
		b.reapHandles(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
