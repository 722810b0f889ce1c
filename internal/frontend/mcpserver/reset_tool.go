package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func (s *Server) resetSandbox(ctx context.Context, req *mcp.CallToolRequest, in ResetInput) (*mcp.CallToolResult, ResetOutput, error) {
	var out ResetOutput
	u, err := s.call(ctx, req, in.SandboxID, needExisting, nil, func(sess *goruntime.Session, _ time.Duration) error {
		if sess == nil {
			return nil
		}
		out.Reset = true
		return sess.Reset(ctx)
	})
	if err != nil {
		return nil, ResetOutput{}, sessions.Describe(err)
	}
	out.SandboxID = u.ID
	text := "/app is empty now; the Go build and module caches were kept"
	if !out.Reset {
		text = "no sandbox started yet: nothing to reset"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
