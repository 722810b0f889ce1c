package goruntimetest

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

var _ goruntime.HandleBackend = (*Backend)(nil)

// handle is a fake handle: its record and its sandbox's ID. The fake
// keeps handles in memory; a real backend keeps them where any process
// finds them.
type handle struct {
	goruntime.Handle
	sandbox string
}

// now is the fake's clock (Backend.SetClock).
func (b *Backend) now() time.Time {
	b.mu.Lock()
	f := b.clock
	b.mu.Unlock()
	if f != nil {
		return f().UTC()
	}
	return time.Now().UTC()
}

// SetClock makes the fake's handles read time from now (a test moves it
// to expire a handle without waiting); nil restores time.Now.
func (b *Backend) SetClock(now func() time.Time) {
	b.mu.Lock()
	b.clock = now
	b.mu.Unlock()
}

// reapHandles closes the sandboxes of expired handles and forgets them.
func (b *Backend) reapHandles(now time.Time) {
	b.mu.Lock()
	var dead []*Sandbox
	for id, h := range b.handles {
		if now.After(h.Expires) {
			if sb := b.live[h.sandbox]; sb != nil {
				dead = append(dead, sb)
			}
			delete(b.handles, id)
		} else if b.live[h.sandbox] == nil {
			delete(b.handles, id) // its sandbox was closed
		}
	}
	b.mu.Unlock()
	for _, sb := range dead {
		_ = sb.Close(context.Background())
	}
}

// CreateHandle opens a sandbox held by a new handle of owner.
func (b *Backend) CreateHandle(ctx context.Context, owner string, spec goruntime.HandleSpec) (goruntime.Handle, goruntime.Sandbox, error) {
	if err := goruntime.CheckOwner(owner); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("create fake handle: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return goruntime.Handle{}, nil, fmt.Errorf("create fake handle: %w", err)
	}
	var sb goruntime.Sandbox
	var err error
	if spec.FromSnapshot != "" {
		sb, err = b.OpenSnapshot(ctx, owner, spec.FromSnapshot)
	} else {
		sb, err = b.Open(ctx)
	}
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	now := b.now()
	h := goruntime.Handle{ID: goruntime.NewHandleID(), Owner: owner, Labels: maps.Clone(spec.Labels), TTL: spec.TTL,
		Created: now, LastUsed: now, Expires: now.Add(spec.TTL)}
	b.mu.Lock()
	b.handles[h.ID] = &handle{Handle: h, sandbox: sb.ID()}
	b.mu.Unlock()
	return h, &handleSandbox{Sandbox: sb.(*Sandbox), b: b, id: h.ID}, nil
}

// lookup returns owner's live handle id, renewed when renew is set.
func (b *Backend) lookup(owner, id string, renew bool) (goruntime.Handle, *Sandbox, error) {
	now := b.now()
	b.reapHandles(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.handles[id]
	if h == nil || h.Owner != owner || b.live[h.sandbox] == nil {
		return goruntime.Handle{}, nil, goruntime.HandleNotFound(id)
	}
	if renew {
		h.LastUsed, h.Expires = now, now.Add(h.TTL)
	}
	out := h.Handle
	out.Labels = maps.Clone(h.Labels)
	return out, b.live[h.sandbox], nil
}

// AttachHandle returns the sandbox of owner's handle id and renews it.
func (b *Backend) AttachHandle(ctx context.Context, owner, id string) (goruntime.Handle, goruntime.Sandbox, error) {
	h, sb, err := b.lookup(owner, id, true)
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	return h, &handleSandbox{Sandbox: sb, b: b, id: id}, nil
}

// ListHandles returns owner's live handles, oldest first.
func (b *Backend) ListHandles(ctx context.Context, owner string) ([]goruntime.Handle, error) {
	b.reapHandles(b.now())
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []goruntime.Handle
	for _, h := range b.handles {
		if h.Owner == owner && b.live[h.sandbox] != nil {
			c := h.Handle
			c.Labels = maps.Clone(h.Labels)
			out = append(out, c)
		}
	}
	goruntime.SortHandles(out)
	return out, nil
}

// CountHandles returns how many live handles the fake holds, of every
// owner.
func (b *Backend) CountHandles(ctx context.Context) (int, error) {
	b.reapHandles(b.now())
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, h := range b.handles {
		if b.live[h.sandbox] != nil {
			n++
		}
	}
	return n, nil
}

// DeleteHandle closes the sandbox of owner's handle id and forgets it.
func (b *Backend) DeleteHandle(ctx context.Context, owner, id string) error {
	_, sb, err := b.lookup(owner, id, false)
	if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.handles, id)
	b.mu.Unlock()
	return sb.Close(ctx)
}

// Handles is how many handles the fake holds (live or not yet reaped).
func (b *Backend) Handles() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.handles)
}

// handleSandbox is a handle's sandbox as CreateHandle and AttachHandle
// return it: Disconnect renews the handle, Close deletes it.
type handleSandbox struct {
	*Sandbox
	b  *Backend
	id string
}

func (s *handleSandbox) Disconnect(ctx context.Context) error {
	now := s.b.now()
	s.b.mu.Lock()
	if h := s.b.handles[s.id]; h != nil {
		h.LastUsed, h.Expires = now, now.Add(h.TTL)
	}
	s.b.mu.Unlock()
	return nil
}

func (s *handleSandbox) Close(ctx context.Context) error {
	s.b.mu.Lock()
	delete(s.b.handles, s.id)
	s.b.mu.Unlock()
	return s.Sandbox.Close(ctx)
}
