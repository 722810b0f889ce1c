package modproxy

import (
	"context"
	"sync"
)

// Every fetch takes one of the proxy's MaxFetches slots for up to
// FetchTimeout. A proxy serving several sandboxes would let one of them
// hold every slot (asking for slow or missing modules in a loop) and so
// starve the others, so each client (a sandbox: the caller names it with
// WithClient) may hold at most MaxFetchesPerClient of them; its further
// fetches wait for one of its own to end, within the same FetchTimeout.

// clientKey is the context key of WithClient.
type clientKey struct{}

// WithClient returns ctx naming the client (e.g. a sandbox ID) that a
// request served with it comes from: the proxy bounds each client's
// fetches at once (Config.MaxFetchesPerClient). Requests without a client
// share the empty name.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// clientSlots holds each client's fetch slots while it has a fetch
// running or waiting; an idle client has no entry.
type clientSlots struct {
	per int
	mu  sync.Mutex
	m   map[string]*clientSlot
}

type clientSlot struct {
	slots chan struct{}
	users int // fetches running or waiting
}

// acquire takes one of client's slots, waiting until ctx ends; release
// gives it back. ok is false when ctx ended first.
func (c *clientSlots) acquire(ctx context.Context, client string) (release func(), ok bool) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*clientSlot{}
	}
	s := c.m[client]
	if s == nil {
		s = &clientSlot{slots: make(chan struct{}, c.per)}
		c.m[client] = s
	}
	s.users++
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		if s.users--; s.users == 0 {
			delete(c.m, client)
		}
		c.mu.Unlock()
	}
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots; done() }, true
	case <-ctx.Done():
		done()
		return nil, false
	}
}
