package agentsandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/apierror"
)

// maxUpload is the SDK's default MaxUploadSize (Write buffers the whole
// file in memory).
const maxUpload = 256 << 20

// Sandbox is one claimed sandbox. Its methods are safe for concurrent use.
type Sandbox struct {
	b         *Backend
	sb        *sandbox.Sandbox
	id        string
	proc      *procAPI // nil when commands go through the router
	stopRenew func()   // stops the claim TTL renewal; nil without a TTL
	// handleTTL is the TTL of the handle whose sandbox this is (handles.go):
	// CloseAll leaves its claim for the handle's own lifetime; 0: none.
	handleTTL time.Duration

	mu   sync.Mutex
	done bool // closed or disconnected
}

var _ goruntime.Sandbox = (*Sandbox)(nil)

// ID returns the SandboxClaim's name, for Backend.Attach.
func (s *Sandbox) ID() string { return s.id }

// PodName returns the name of the sandbox's pod.
func (s *Sandbox) PodName() string { return s.sb.PodName() }

func (s *Sandbox) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("sandbox %s: %w", s.id, goruntime.ErrClosed)
	}
	return nil
}

// WriteFile uploads r as /app/name. name must be a plain file name
// (goruntime.CheckName), else the error wraps goruntime.ErrPathEscape;
// content over 256 MiB wraps goruntime.ErrTooLarge.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := goruntime.CheckName(name); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxUpload+1))
	if err != nil {
		return fmt.Errorf("write %s: read content: %w", name, err)
	}
	if len(data) > maxUpload {
		return fmt.Errorf("write %s: content over %d bytes: %w", name, maxUpload, goruntime.ErrTooLarge)
	}
	if err := s.sb.Write(ctx, name, data); err != nil {
		return s.explain("write "+name, err)
	}
	return nil
}

var _ goruntime.UnpackingSandbox = (*Sandbox)(nil)

// Unpack writes the files of the tar archive r under /app in one request
// to the runtime server's /unpack (goruntime.UnpackingSandbox), streamed,
// over the route the sandboxd API takes (Options.Connectivity, to
// Options.RuntimePort). Errors wrap errors.ErrUnsupported when there is no
// such route (ConnectivityRouter) or the pod's server predates /unpack
// (a Session then uploads the archive and runs tar), ErrSandboxGone when
// the pod cannot be reached, and what the server answered otherwise
// (ErrPathEscape, ErrTooLarge, ...).
func (s *Sandbox) Unpack(ctx context.Context, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.proc == nil {
		return fmt.Errorf("unpack in sandbox %s: connectivity %q reaches the runtime server through the SDK only: %w", s.id, s.b.opts.Connectivity, errors.ErrUnsupported)
	}
	c, err := s.proc.filesClient(ctx)
	if err != nil {
		return fmt.Errorf("unpack in sandbox %s: %w", s.id, err)
	}
	err = c.Unpack(ctx, r, nil)
	var netErr net.Error
	if err != nil && ctx.Err() == nil && (errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED)) {
		return fmt.Errorf("unpack in sandbox %s: %w: %w", s.id, goruntime.ErrSandboxGone, err)
	}
	if err != nil {
		return fmt.Errorf("unpack in sandbox %s: %w", s.id, err)
	}
	return nil
}

// ReadFile returns /app/p. Errors wrap goruntime.ErrNotExist when it is
// missing and goruntime.ErrPathEscape when p is absolute, has "..", or the
// server refuses it.
func (s *Sandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := goruntime.CheckPath(p); err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	data, err := s.sb.Read(ctx, p)
	if err != nil {
		return nil, s.explain("read "+p, err)
	}
	return data, nil
}

// List returns the entries of directory p under /app ("." for /app).
// Errors wrap goruntime.ErrNotExist when p is missing or not a directory.
func (s *Sandbox) List(ctx context.Context, p string) ([]goruntime.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if p == "" {
		p = "."
	}
	if err := goruntime.CheckPath(p); err != nil {
		return nil, fmt.Errorf("list %q: %w", p, err)
	}
	entries, err := s.sb.List(ctx, p)
	if err != nil {
		return nil, s.explain("list "+p, err)
	}
	out := make([]goruntime.FileInfo, 0, len(entries))
	for _, e := range entries {
		out = append(out, goruntime.FileInfo{
			Name:    e.Name,
			Size:    e.Size,
			IsDir:   e.Type == sandbox.FileTypeDirectory,
			ModTime: e.ModTime,
		})
	}
	return out, nil
}

// Close deletes the claim (the controller then deletes the pod). Closing
// again, or after Disconnect, returns nil.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.finish() {
		return nil
	}
	if err := s.sb.Close(ctx); err != nil {
		return fmt.Errorf("delete claim %s/%s: %w", s.b.opts.Namespace, s.id, err)
	}
	return nil
}

// Disconnect closes the connection and keeps the claim, for a later
// Backend.Attach(ID()). Calling it again, or after Close, returns nil.
func (s *Sandbox) Disconnect(ctx context.Context) error {
	if !s.finish() {
		return nil
	}
	if err := s.sb.Disconnect(ctx); err != nil {
		return fmt.Errorf("disconnect from claim %s/%s: %w", s.b.opts.Namespace, s.id, err)
	}
	return nil
}

// finish marks the sandbox done; it reports false if it already was.
func (s *Sandbox) finish() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return false
	}
	s.done = true
	s.b.release(s)
	if s.stopRenew != nil {
		s.stopRenew()
	}
	if s.proc != nil {
		s.proc.close()
	}
	return true
}

// explain maps an SDK error from a call on a ready sandbox to our
// sentinels, keeping the SDK's: an HTTP error answer as apierror.Decode
// says (404 -> ErrNotExist, 403 -> ErrPathEscape or fs.ErrPermission,
// 413 -> ErrTooLarge), a lost port-forward or a closed
// connection -> ErrSandboxGone; a 502 from the router gets a hint.
func (s *Sandbox) explain(op string, err error) error {
	err = fmt.Errorf("%s in sandbox %s: %w", op, s.id, err)
	var he *sandbox.HTTPError
	if errors.As(err, &he) {
		if _, sentinel := apierror.Decode(he.StatusCode, []byte(he.Body)); sentinel != nil {
			return fmt.Errorf("%w: %w", sentinel, err)
		}
		if he.StatusCode == http.StatusBadGateway {
			return fmt.Errorf("the router could not reach the sandbox pod (deleted, not listening on 8888, or blocked by a NetworkPolicy; see docs/kubernetes.md#502-from-the-router): %w", err)
		}
	}
	switch {
	case errors.Is(err, sandbox.ErrPortForwardDied):
		return fmt.Errorf("%w (port-forward to the router died; Attach again): %w", err, goruntime.ErrSandboxGone)
	case errors.Is(err, sandbox.ErrNotReady):
		return fmt.Errorf("%w: %w", err, goruntime.ErrSandboxGone)
	case errors.Is(err, sandbox.ErrRetriesExhausted) && strings.Contains(err.Error(), "status 502"):
		return fmt.Errorf("the router could not reach the sandbox pod (see docs/kubernetes.md#502-from-the-router): %w", err)
	}
	return err
}
