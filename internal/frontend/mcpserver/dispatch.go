package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// used says which sandbox a tool call ran in, for its result.
type used struct {
	// ID is the sandbox_id the result names: the handle's ID for a call
	// with sandbox_id (or one that made a handle), else the session
	// sandbox's own ID; "" when the call needed no sandbox.
	ID string
	// Created: the call made a new handle (a stateless server's call
	// without sandbox_id, createForCall).
	Created bool
	// TTL is that handle's idle TTL.
	TTL time.Duration
}

// need says what a tool call needs of its sandbox.
type need int

const (
	// needExisting: the sandbox if there is one (reset_sandbox): without,
	// fn gets a nil session.
	needExisting need = iota
	// needSandbox: a sandbox, opened if the session has none (read_file,
	// list_files).
	needSandbox
	// needWork: as needSandbox; a stateless server makes a handle for it
	// (run_go_code, check_go_code).
	needWork
)

// call runs fn in the sandbox a tool call names:
//   - with sandboxID, the sandbox of the caller's handle of that ID
//     (another principal's ID answers as a missing one);
//   - without, over stdio and stateful HTTP, the caller's MCP session's
//     own sandbox (the pool's process-wide client over stdio, where
//     sessions have no ID), holding the session's turn (sessions.Pool.Do);
//     one it opens counts against the caller's principal until it closes;
//   - without, on a stateless server, a new handle for needWork
//     (run_go_code, check_go_code: the result names it), else an error
//     asking for sandbox_id.
//
// announce, when non-nil, is told what the call waits for.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, sandboxID string, n need, announce func(string),
	fn func(sess *goruntime.Session, fresh time.Duration) error) (used, error) {
	if sandboxID != "" {
		return used{ID: sandboxID}, s.withHandle(ctx, req, sandboxID, fn)
	}
	if s.cfg.Stateless {
		if n != needWork {
			return used{}, fmt.Errorf("sandbox_id is required: this server is stateless (no session keeps a sandbox between calls); create one with create_sandbox, or run run_go_code without sandbox_id to get one")
		}
		return s.createForCall(ctx, req, fn)
	}
	var u used
	c := sessions.Call{Key: sessions.ProcessKey, Principal: s.principal(req), Open: n != needExisting, Announce: announce}
	if ss := req.Session; ss != nil && ss.ID() != "" {
		c.Key = ss.ID()
		c.Ended = func() <-chan struct{} {
			done := make(chan struct{})
			go func() {
				_ = ss.Wait()
				close(done)
			}()
			return done
		}
	}
	err := s.pool.Do(ctx, c, func(sess *goruntime.Session, fresh time.Duration) error {
		if sess != nil {
			u.ID = sess.ID()
		}
		return fn(sess, fresh)
	})
	return u, s.explainLimit(err)
}

// withHandle runs fn in the sandbox of the caller's handle id, attached
// for the call and released (renewing the handle) after it.
func (s *Server) withHandle(ctx context.Context, req *mcp.CallToolRequest, id string,
	fn func(sess *goruntime.Session, fresh time.Duration) error) error {
	hb, err := s.handles()
	if err != nil {
		return err
	}
	_, sb, err := hb.AttachHandle(ctx, s.principal(req), id)
	if err != nil {
		return describeHandle(err)
	}
	defer s.release(ctx, sb)
	err = fn(goruntime.NewSession(sb, s.cfg.Session), 0)
	if errors.Is(err, goruntime.ErrSandboxGone) {
		return fmt.Errorf("sandbox_id %q: %w; its files are lost: create_sandbox makes a new one", id, err)
	}
	return err
}

// release lets go of an attached handle's sandbox: it keeps running, and
// its idle TTL counts from now.
func (s *Server) release(ctx context.Context, sb goruntime.Sandbox) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := sb.Disconnect(dctx); err != nil {
		s.log.Warn("release sandbox handle", "err", err)
	}
}

// describeHandle turns a handle error into one a model can act on. A
// missing ID and another principal's read the same.
func describeHandle(err error) error {
	if errors.Is(err, goruntime.ErrSandboxNotFound) {
		return fmt.Errorf("%w: no sandbox of yours has this sandbox_id (it was deleted, ended after its idle TTL, or never existed); list_sandboxes lists yours, create_sandbox makes one", err)
	}
	return sessions.Describe(err)
}
