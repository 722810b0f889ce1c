package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// The one check of how many sandboxes may be open: in all
// (Config.MaxSandboxes) and of one principal (Config.MaxPerPrincipal).
// The pool counts what it holds: its slots' sandboxes, open or opening,
// each under the principal whose call opened it until it closes (client
// ended, reaped when idle, gone, pool closed, or its open failed), and
// the sandboxes a front end is making outside it (Reserve). The
// sandboxes outside it that exist already (a front end's durable
// handles) are counted by Config.Others and Config.OthersOf, asked
// before each open.

// ErrTooManySandboxes is wrapped by the error of a call that needs a
// sandbox while Config.MaxSandboxes are open.
var ErrTooManySandboxes = errors.New("too many sandboxes open on this server")

// ErrPrincipalFull is wrapped by the error of a call that needs a
// sandbox while its principal holds Config.MaxPerPrincipal.
var ErrPrincipalFull = errors.New("too many sandboxes of one principal")

// use is what the pool counts of one principal.
type use struct {
	sessions int // its slots' sandboxes, open or opening
	making   int // sandboxes being made for it outside the pool (Reserve)
}

// addLocked adds d to principal's use, forgetting a principal that holds
// nothing. p.mu is held.
func (p *Pool) addLocked(principal string, d use) {
	u := p.byPrincipal[principal]
	u.sessions += d.sessions
	u.making += d.making
	if u == (use{}) {
		delete(p.byPrincipal, principal)
		return
	}
	p.byPrincipal[principal] = u
}

// outside is what Config.Others and Config.OthersOf count: the
// sandboxes outside the pool, every principal's and one principal's.
type outside struct{ all, mine int }

// outside asks Config.Others and Config.OthersOf for principal, each only
// when its bound is set.
func (p *Pool) outside(ctx context.Context, principal string) (outside, error) {
	var o outside
	if p.cfg.Others != nil && p.cfg.MaxSandboxes > 0 {
		n, err := p.cfg.Others(ctx)
		if err != nil {
			return o, fmt.Errorf("count the sandboxes open (to keep within the limit): %w", err)
		}
		o.all = n
	}
	if p.cfg.OthersOf != nil && p.cfg.MaxPerPrincipal > 0 {
		n, err := p.cfg.OthersOf(ctx, principal)
		if err != nil {
			return o, fmt.Errorf("count the sandboxes of %q (to keep within its share): %w", principal, err)
		}
		o.mine = n
	}
	return o, nil
}

// roomLocked is the one check of both bounds for one more sandbox of
// principal, with out counted outside the pool. A principal past its
// share is told so first: that is what it can act on. p.mu is held.
func (p *Pool) roomLocked(principal string, out outside) error {
	if max := p.cfg.MaxPerPrincipal; max > 0 {
		u := p.byPrincipal[principal]
		if n := u.sessions + u.making + out.mine; n >= max {
			return fmt.Errorf("open a sandbox: %q already holds %d of the %d sandboxes one principal may hold at once (%d for its sessions, %d durable): %w",
				principal, n, max, u.sessions, u.making+out.mine, ErrPrincipalFull)
		}
	}
	max := p.cfg.MaxSandboxes
	durable := p.making + out.all
	if max <= 0 || p.open+durable < max {
		return nil
	}
	if durable > 0 {
		return fmt.Errorf("open a sandbox: %d of %d in use (%d for sessions, %d durable); try again when others end: %w",
			p.open+durable, max, p.open, durable, ErrTooManySandboxes)
	}
	return fmt.Errorf("open a sandbox: %d of %d in use; try again when other sessions end: %w", p.open, max, ErrTooManySandboxes)
}

// Reserve counts one sandbox that a front end makes for principal
// outside the pool (a durable handle) against both bounds, or returns an
// error wrapping ErrPrincipalFull or ErrTooManySandboxes when there is no
// room for it. Call done once the sandbox is made, when Others and
// OthersOf count it, or once making it failed. Until then the pool's
// other opens and Reserves count it, so that concurrent ones cannot all
// pass the check; between the backend counting it and done it counts
// twice, which errs on the side of refusing.
func (p *Pool) Reserve(ctx context.Context, principal string) (done func(), err error) {
	out, err := p.outside(ctx, principal)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.roomLocked(principal, out); err != nil {
		return nil, err
	}
	p.making++
	p.addLocked(principal, use{making: 1})
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.making--
			p.addLocked(principal, use{making: -1})
			p.mu.Unlock()
		})
	}, nil
}
