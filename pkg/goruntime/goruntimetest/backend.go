package goruntimetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Backend is the fake backend. Its zero value is not usable: call New.
type Backend struct {
	root   string
	opened atomic.Int32
	closed atomic.Int32
	mu     sync.Mutex
	live   map[string]*Sandbox
	// handles.go
	handles map[string]*handle
	clock   func() time.Time
	// snapshots.go
	snapshots map[string]*snapshot
}

var _ goruntime.Backend = (*Backend)(nil)

// New returns a backend whose sandboxes are directories under root (a
// test's t.TempDir()).
func New(root string) *Backend {
	return &Backend{root: root, live: map[string]*Sandbox{}, handles: map[string]*handle{}}
}

// Name is "fake".
func (b *Backend) Name() string { return "fake" }

// Open makes a new, empty sandbox directory.
func (b *Backend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open fake sandbox: %w", err)
	}
	id := fmt.Sprintf("sb%d", b.opened.Add(1))
	dir := filepath.Join(b.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open fake sandbox %s: %w", id, err)
	}
	sb := &Sandbox{b: b, id: id, dir: dir, running: map[*runningCmd]struct{}{}}
	b.mu.Lock()
	b.live[id] = sb
	b.mu.Unlock()
	return sb, nil
}

// Attach returns the open sandbox id, or an error wrapping
// goruntime.ErrSandboxNotFound.
func (b *Backend) Attach(ctx context.Context, id string) (goruntime.Sandbox, error) {
	if sb := b.Sandbox(id); sb != nil {
		return sb, nil
	}
	return nil, fmt.Errorf("attach fake sandbox %s: %w", id, goruntime.ErrSandboxNotFound)
}

// Sandbox returns the open sandbox id, or nil.
func (b *Backend) Sandbox(id string) *Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[id]
}

// Opened is how many sandboxes Open made.
func (b *Backend) Opened() int { return int(b.opened.Load()) }

// Closed is how many sandboxes were closed.
func (b *Backend) Closed() int { return int(b.closed.Load()) }

// Live is how many sandboxes are open (made and not closed).
func (b *Backend) Live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}
