package goruntimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Sandbox is one fake sandbox: a directory, its commands run there.
type Sandbox struct {
	b   *Backend
	id  string
	dir string

	dead        atomic.Bool
	largestRead atomic.Int64
	limit       atomic.Pointer[goruntime.Limit]

	mu      sync.Mutex
	closed  bool
	running map[*runningCmd]struct{}
}

// runningCmd is a command's process group, once it runs.
type runningCmd struct{ pgid atomic.Int64 }

var _ goruntime.Sandbox = (*Sandbox)(nil)

// ID names the sandbox for Backend.Attach.
func (s *Sandbox) ID() string { return s.id }

// Dir is the sandbox's work directory on this machine.
func (s *Sandbox) Dir() string { return s.dir }

// Kill makes the sandbox gone: every later call fails with an error
// wrapping goruntime.ErrSandboxGone, as when a real sandbox dies.
func (s *Sandbox) Kill() { s.dead.Store(true) }

// SetLimit makes every later command report that it ran into l.
func (s *Sandbox) SetLimit(l goruntime.Limit) { s.limit.Store(&l) }

// LargestRead is the most bytes one ReadFile returned.
func (s *Sandbox) LargestRead() int64 { return s.largestRead.Load() }

// gone is the error of a call to a killed or closed sandbox, or nil.
func (s *Sandbox) gone(op string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if s.dead.Load() || closed {
		return fmt.Errorf("%s in fake sandbox %s: %w", op, s.id, goruntime.ErrSandboxGone)
	}
	return nil
}

// Exec runs req with RunCommand in the sandbox's directory.
func (s *Sandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	// Registered under the lock Close takes, and told its group under it
	// too (started): either Close finds the group to kill, or the command
	// finds the sandbox closed and kills its group itself. Registered
	// after an unlocked check, or killed only once its group was known, a
	// command Close raced on a busy machine ran to its end.
	rc := &runningCmd{}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.running[rc] = struct{}{}
	}
	s.mu.Unlock()
	if closed || s.dead.Load() {
		return nil, fmt.Errorf("exec in fake sandbox %s: %w", s.id, goruntime.ErrSandboxGone)
	}
	started := func(pgid int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rc.pgid.Store(int64(pgid))
		if s.closed {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	defer func() {
		s.mu.Lock()
		delete(s.running, rc)
		s.mu.Unlock()
	}()
	dir := s.dir
	if req.Dir != "" {
		if err := goruntime.CheckPath(req.Dir); err != nil {
			return nil, err
		}
		dir = filepath.Join(s.dir, req.Dir)
	}
	res, err := RunCommand(ctx, dir, nil, req, started)
	if gerr := s.gone("exec"); gerr != nil {
		return nil, gerr // closed or killed while it ran
	}
	if err != nil {
		return nil, err
	}
	if l := s.limit.Load(); l != nil {
		res.Limit = *l
	}
	return res, nil
}

// WriteFile streams r into the file name, a plain name.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := s.gone("upload"); err != nil {
		return err
	}
	if err := goruntime.CheckPath(name); err != nil {
		return err
	}
	if filepath.Base(name) != name {
		return fmt.Errorf("write %s: not a plain file name: %w", name, goruntime.ErrPathEscape)
	}
	f, err := os.Create(filepath.Join(s.dir, name))
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReadFile returns the bytes of the file p.
func (s *Sandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := s.gone("read"); err != nil {
		return nil, err
	}
	if err := goruntime.CheckPath(p); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(s.dir, p))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", p, goruntime.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if n := int64(len(data)); n > s.largestRead.Load() {
		s.largestRead.Store(n)
	}
	return data, nil
}

// List returns the entries of the directory p.
func (s *Sandbox) List(ctx context.Context, p string) ([]goruntime.FileInfo, error) {
	if err := s.gone("list"); err != nil {
		return nil, err
	}
	if err := goruntime.CheckPath(p); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, p))
	if err != nil {
		return nil, fmt.Errorf("list %s: %v: %w", p, err, goruntime.ErrNotExist)
	}
	var out []goruntime.FileInfo
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		out = append(out, goruntime.FileInfo{Name: e.Name(), Size: fi.Size(), IsDir: e.IsDir(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// Close kills what runs in the sandbox and removes its directory.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for rc := range s.running {
		if pgid := rc.pgid.Load(); pgid > 0 {
			_ = syscall.Kill(-int(pgid), syscall.SIGKILL)
		}
	}
	s.mu.Unlock()
	s.b.closed.Add(1)
	s.b.mu.Lock()
	delete(s.b.live, s.id)
	s.b.mu.Unlock()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("close fake sandbox %s: %w", s.id, err)
	}
	return nil
}

// Disconnect leaves the sandbox open, to be attached again.
func (s *Sandbox) Disconnect(ctx context.Context) error { return nil }
