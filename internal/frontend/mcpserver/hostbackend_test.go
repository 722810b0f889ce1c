package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// hostBackend is a test backend without isolation: each sandbox is a
// temporary directory on this machine and commands run there with
// /bin/sh -c. It keeps the contract the server relies on (timeouts kill the
// process group, a cancelled ctx kills the command, ReadFile/List errors
// wrap the sentinels) so the server's own logic can be tested fast; the
// tests in cmd/mcp-server drive the real local backend.
type hostBackend struct {
	root   string
	opened atomic.Int32
	closed atomic.Int32
	mu     sync.Mutex
	live   map[string]*hostSandbox
}

func newHostBackend(root string) *hostBackend {
	return &hostBackend{root: root, live: map[string]*hostSandbox{}}
}

func (b *hostBackend) Name() string { return "host" }

func (b *hostBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	n := b.opened.Add(1)
	id := fmt.Sprintf("sb%d", n)
	dir := filepath.Join(b.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sb := &hostSandbox{b: b, id: id, dir: dir}
	b.mu.Lock()
	b.live[id] = sb
	b.mu.Unlock()
	return sb, nil
}

func (b *hostBackend) Attach(ctx context.Context, id string) (goruntime.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sb := b.live[id]
	if sb == nil {
		return nil, fmt.Errorf("attach %s: %w", id, goruntime.ErrSandboxNotFound)
	}
	return sb, nil
}

// sandbox returns the live sandbox with the given ID, or nil.
func (b *hostBackend) sandbox(id string) *hostSandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[id]
}

func (b *hostBackend) liveCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}

type hostSandbox struct {
	b    *hostBackend
	id   string
	dir  string
	dead atomic.Bool // set by a test: calls fail with ErrSandboxGone
	// largestRead is the most bytes one ReadFile returned, which the
	// server then held in memory.
	largestRead atomic.Int64
	// limit, when set by a test, is reported as the limit every command
	// ran into.
	limit atomic.Pointer[goruntime.Limit]
}

func (s *hostSandbox) ID() string { return s.id }

func (s *hostSandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if s.dead.Load() {
		return nil, fmt.Errorf("exec in %s: %w", s.id, goruntime.ErrSandboxGone)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = s.dir
	cmd.Env = os.Environ()
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	select {
	case <-done:
	case <-timer.C:
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil, ctx.Err()
	}
	res := &goruntime.ExecResult{
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		ExitCode: cmd.ProcessState.ExitCode(),
		TimedOut: timedOut,
		Duration: time.Since(start),
	}
	if timedOut {
		res.ExitCode = 124
	}
	if l := s.limit.Load(); l != nil {
		res.Limit = *l
	}
	return res, nil
}

func (s *hostSandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if s.dead.Load() {
		return fmt.Errorf("upload to %s: %w", s.id, goruntime.ErrSandboxGone)
	}
	if strings.Contains(name, "/") {
		return fmt.Errorf("write %s: %w", name, goruntime.ErrPathEscape)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, name), data, 0o644)
}

func (s *hostSandbox) resolve(p string) (string, error) {
	if filepath.IsAbs(p) || strings.Contains(p, "..") {
		return "", fmt.Errorf("%s: %w", p, goruntime.ErrPathEscape)
	}
	return filepath.Join(s.dir, p), nil
}

func (s *hostSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	full, err := s.resolve(p)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(full)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", p, goruntime.ErrNotExist)
	}
	if n := int64(len(data)); n > s.largestRead.Load() {
		s.largestRead.Store(n)
	}
	return data, err
}

func (s *hostSandbox) List(ctx context.Context, p string) ([]goruntime.FileInfo, error) {
	full, err := s.resolve(p)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(full)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, goruntime.ErrNotExist)
	}
	var out []goruntime.FileInfo
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, goruntime.FileInfo{Name: e.Name(), Size: fi.Size(), IsDir: e.IsDir(), ModTime: fi.ModTime()})
	}
	return out, nil
}

func (s *hostSandbox) Close(ctx context.Context) error {
	s.b.closed.Add(1)
	s.b.mu.Lock()
	delete(s.b.live, s.id)
	s.b.mu.Unlock()
	return os.RemoveAll(s.dir)
}

func (s *hostSandbox) Disconnect(ctx context.Context) error { return nil }
