package mcpserver

import (
	"context"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
)

// startProgress sends notifications/progress for one run_go_code call
// while it runs, when the client gave a progress token (else it returns
// nil, which reports nothing): every Config.ProgressInterval, with the
// elapsed seconds as progress, the timeout as total and what the call
// waits for, or the latest output line, as message.
func (s *Server) startProgress(ctx context.Context, req *mcp.CallToolRequest, timeout time.Duration) *sessions.Progress {
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	if token == nil || req.Session == nil {
		return nil
	}
	return sessions.StartProgress(ctx, s.cfg.ProgressInterval, func(elapsed time.Duration, msg string) {
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      math.Round(elapsed.Seconds()*10) / 10,
			Total:         timeout.Seconds(),
			Message:       msg,
		})
		if err != nil {
			s.log.Debug("progress notification", "err", err)
			return
		}
		eventSent(ctx) // its stream may be closed again (ssepoll.go)
	})
}
