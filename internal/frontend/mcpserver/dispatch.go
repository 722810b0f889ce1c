package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// call runs fn holding the turn of the caller's MCP session, with the
// session's sandbox opened. announce, when non-nil, is told before a
// sandbox is opened.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, open bool, announce func(string),
	fn func(sess *goruntime.Session, fresh time.Duration) error) error {
	key := stdioKey
	var watch func() <-chan struct{}
	if ss := req.Session; ss != nil && ss.ID() != "" {
		key = ss.ID()
		watch = func() <-chan struct{} {
			done := make(chan struct{})
			go func() {
				_ = ss.Wait()
				close(done)
			}()
			return done
		}
	}
	var stopForward func()
	if announce != nil {
		// A call waiting behind an open (the one at startup, another
		// call's) tells its client how far that open is.
		stopForward = forwardOpening(func() string { return s.pool.openingMessage(key) }, announce)
	}
	sl, err := s.pool.acquire(ctx, key, watch)
	if stopForward != nil {
		stopForward()
	}
	if err != nil {
		return err
	}
	defer s.pool.release(sl)
	if sl.sess == nil && !open {
		return fn(nil, 0)
	}
	if sl.sess == nil && announce != nil {
		announce("starting a " + s.cfg.Backend.Name() + " sandbox")
		ctx = goruntime.WithProgress(ctx, func(p goruntime.Progress) { announce(p.String()) })
	}
	sess, err := s.pool.session(ctx, sl)
	if err != nil {
		return err
	}
	reaped := sl.reaped
	sl.reaped = 0
	err = fn(sess, reaped)
	if errors.Is(err, goruntime.ErrSandboxGone) {
		// Forget the dead sandbox so the session's next call opens a new one.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		s.pool.closeSession(cctx, sl, "sandbox gone")
		cancel()
	}
	return err
}

// describe turns a library error into one a model can act on.
func describe(err error) error {
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
