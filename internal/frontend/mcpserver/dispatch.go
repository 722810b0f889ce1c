package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// call runs fn in the sandbox of the caller's MCP session (the pool's
// process-wide client over stdio, where sessions have no ID), holding the
// session's turn (sessions.Pool.Do). announce, when non-nil, is told what
// the call waits for.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, open bool, announce func(string),
	fn func(sess *goruntime.Session, fresh time.Duration) error) error {
	c := sessions.Call{Key: sessions.ProcessKey, Open: open, Announce: announce}
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
	return s.pool.Do(ctx, c, fn)
}
