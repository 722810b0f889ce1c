package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Call says how Do runs one call of a client.
type Call struct {
	// Key is the client's key (ProcessKey for the process-wide client).
	Key string
	// Principal is who makes the call (a front end's authenticated
	// identity): a sandbox the call opens counts against its share
	// (Config.MaxPerPrincipal) until the sandbox closes.
	Principal string
	// Ended, when not nil, is called once when the client's slot is made
	// and returns a channel closed when the client ends: its sandbox is
	// then closed.
	Ended func() <-chan struct{}
	// Open: the call needs the sandbox, opened if the client has none.
	// Without it, a client with no sandbox gets fn(nil, 0).
	Open bool
	// Announce, when not nil, is told what the call waits for: the
	// progress of an open in flight (the client's own or another call's)
	// and of the open this call starts.
	Announce func(string)
}

// Do runs fn holding the turn of c.Key's client (calls of one client run
// one at a time, in order), with the client's sandbox opened when c.Open.
// fn gets the session and, once, how long an earlier sandbox of the
// client sat idle before Reap closed it (0 otherwise). A sandbox that
// fn's error says is gone (goruntime.ErrSandboxGone) is forgotten, so the
// client's next call opens a new one.
func (p *Pool) Do(ctx context.Context, c Call, fn func(sess *goruntime.Session, reaped time.Duration) error) error {
	var stopForward func()
	if c.Announce != nil {
		// A call waiting behind an open (the one at startup, another
		// call's) tells its client how far that open is.
		stopForward = forwardOpening(func() string { return p.openingMessage(c.Key) }, c.Announce)
	}
	sl, err := p.acquire(ctx, c.Key, c.Ended)
	if stopForward != nil {
		stopForward()
	}
	if err != nil {
		return err
	}
	defer p.release(sl)
	if sl.sess == nil && !c.Open {
		return fn(nil, 0)
	}
	if sl.sess == nil && c.Announce != nil {
		c.Announce("starting a " + p.backend.Name() + " sandbox")
		ctx = goruntime.WithProgress(ctx, func(pr goruntime.Progress) { c.Announce(pr.String()) })
	}
	sess, err := p.session(ctx, sl, c.Principal)
	if err != nil {
		return err
	}
	reaped := sl.reaped
	sl.reaped = 0
	err = fn(sess, reaped)
	if errors.Is(err, goruntime.ErrSandboxGone) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		p.closeSession(cctx, sl, "sandbox gone")
		cancel()
	}
	return err
}

// OpenNow opens (or, with Config.Claim, attaches) key's sandbox if it has
// none, waiting for the client's calls ahead; it counts against
// principal's share as a call's would.
func (p *Pool) OpenNow(ctx context.Context, key, principal string) error {
	sl, err := p.acquire(ctx, key, nil)
	if err != nil {
		return err
	}
	defer p.release(sl)
	_, err = p.session(ctx, sl, principal)
	return err
}

// forwardOpening passes message() to announce every openingPoll until the
// returned stop is called, whenever it is not empty.
func forwardOpening(message func() string, announce func(string)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(openingPoll)
		defer t.Stop()
		for {
			if m := message(); m != "" {
				announce(m)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// openingPoll is how often a call waiting behind an open picks up its
// progress.
const openingPoll = 250 * time.Millisecond

// Describe turns a library error into one a user (or a model) can act on:
// what to do about a path outside the work directory, a sandbox that is
// gone, a backend that is unavailable.
func Describe(err error) error {
	switch {
	case errors.Is(err, goruntime.ErrPathEscape):
		return fmt.Errorf("%w; use paths relative to /app such as main.go or pkg/util.go (a symlink on the way must point inside /app too)", err)
	case errors.Is(err, goruntime.ErrSandboxGone):
		return fmt.Errorf("%w; the next call starts a new, empty sandbox (files from earlier calls are lost)", err)
	case errors.Is(err, goruntime.ErrUnavailable):
		return fmt.Errorf("the sandbox backend is unavailable: %w", err)
	}
	return err
}
