package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call stopped by shutdown says what is left: a session's sandbox ends
// with the server; a handle's (the call named a sandbox_id, or the server
// is stateless) remains and is served again by its sandbox_id.
func TestShutdownAnswerSaysWhatRemains(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		args      string
		handle    bool
	}{
		{"session sandbox", false, `{"command":"sleep 9"}`, false},
		{"empty sandbox_id", false, `{"command":"sleep 9","sandbox_id":""}`, false},
		{"handle", false, `{"command":"sleep 9","sandbox_id":"0123456789abcdef0123456789abcdef"}`, true},
		{"stateless", true, `{"command":"sleep 9"}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newInflight(c.stateless)
			entered := make(chan struct{})
			h := f.middleware(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
				close(entered)
				<-ctx.Done()
				return nil, ctx.Err()
			})
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "run_go_code", Arguments: json.RawMessage(c.args)}}
			type answer struct {
				res mcp.Result
				err error
			}
			got := make(chan answer, 1)
			go func() { res, err := h(context.Background(), "tools/call", req); got <- answer{res, err} }()
			<-entered
			f.stopAndWait(context.Background())
			a := <-got
			res, ok := a.res.(*mcp.CallToolResult)
			if a.err != nil || !ok || !res.IsError {
				t.Fatalf("stopped call answered %v, %v; want a tool error", a.res, a.err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if remains := strings.Contains(text, "same sandbox_id"); remains != c.handle || !strings.Contains(text, "shutting down") {
				t.Errorf("answer %q: says the sandbox remains = %v, want %v", text, remains, c.handle)
			}
			// A call arriving after the stop gets the same answer.
			res2, _ := h(context.Background(), "tools/call", req)
			if text2 := res2.(*mcp.CallToolResult).Content[0].(*mcp.TextContent).Text; text2 != text {
				t.Errorf("late call answered %q, want %q", text2, text)
			}
		})
	}
}
