package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Shutdown timing.
const (
	// drainTimeout bounds how long a server told to stop waits for the
	// tool calls it stopped to return and their answers to go out.
	drainTimeout = 10 * time.Second
	// answerPoll is how often a stdio server told to stop looks whether
	// the answers of the calls it stopped went out: the go-sdk writes a
	// call's answer after its handler returned, and drops answers written
	// once the connection is closing.
	answerPoll = 5 * time.Millisecond
)

// errShuttingDown is the cause of a tool call stopped by shutdown.
var errShuttingDown = errors.New("mcp-server is shutting down")

// The answers of a tool call stopped by shutdown: in the session's own
// sandbox, which ends with the server, or in a handle's (the call named a
// sandbox_id, or --stateless made one), which outlives it.
const (
	shutdownMessage       = "mcp-server is shutting down (it received SIGINT or SIGTERM): this call was stopped before it finished, and its command, if one ran, was killed. Files written by earlier calls are gone unless the server runs with --persistent."
	shutdownHandleMessage = "mcp-server is shutting down (it received SIGINT or SIGTERM): this call was stopped before it finished, and its command, if one ran, was killed. The sandbox and the files of earlier calls remain: call again with the same sandbox_id (another replica, or this server once restarted, serves it; list_sandboxes lists yours)."
)

// inflight tracks the tool calls running, so that a server told to stop
// can stop them and let each send its answer (an error saying why)
// before the connection closes, instead of leaving the client waiting.
type inflight struct {
	// stateless: every call's sandbox is a handle (Config.Stateless).
	stateless bool
	stopping  context.Context
	stop      context.CancelCauseFunc

	mu      sync.Mutex
	running int
	idle    chan struct{} // closed when running drops to 0; nil while 0
}

func newInflight(stateless bool) *inflight {
	ctx, stop := context.WithCancelCause(context.Background())
	return &inflight{stateless: stateless, stopping: ctx, stop: stop}
}

// middleware runs each tools/call with a context that ends when the server
// stops, and answers a call ended that way with shutdownMessage.
func (f *inflight) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		f.begin()
		defer f.end()
		durable := f.stateless || namesSandbox(req)
		if f.stopping.Err() != nil {
			return stoppedResult(durable), nil
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		unwatch := context.AfterFunc(f.stopping, func() { cancel(errShuttingDown) })
		defer unwatch()
		res, err := next(ctx, method, req)
		if errors.Is(context.Cause(ctx), errShuttingDown) {
			return stoppedResult(durable), nil
		}
		return res, err
	}
}

func stoppedResult(durable bool) *mcp.CallToolResult {
	text := shutdownMessage
	if durable {
		text = shutdownHandleMessage
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// namesSandbox reports whether a tools/call names a sandbox_id.
func namesSandbox(req mcp.Request) bool {
	call, ok := req.(*mcp.CallToolRequest)
	if !ok || call.Params == nil || len(call.Params.Arguments) == 0 {
		return false
	}
	var args struct {
		SandboxID string `json:"sandbox_id"`
	}
	return json.Unmarshal(call.Params.Arguments, &args) == nil && args.SandboxID != ""
}

func (f *inflight) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == 0 {
		f.idle = make(chan struct{})
	}
	f.running++
}

func (f *inflight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if f.running == 0 {
		close(f.idle)
		f.idle = nil
	}
}

// stopAndWait stops every tool call running and refuses new ones, then
// waits until none runs, at most until ctx is done. It reports how many
// were running when it began.
func (f *inflight) stopAndWait(ctx context.Context) int {
	f.stop(errShuttingDown)
	f.mu.Lock()
	n, idle := f.running, f.idle
	f.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	return n
}

// isResponse reports whether a stdio message is a JSON-RPC response (an
// id and no method), as the go-sdk writes them: {"jsonrpc":"2.0","id":...
func isResponse(msg []byte) bool {
	return bytes.HasPrefix(msg, []byte(`{"jsonrpc":"2.0","id":`)) && !bytes.Contains(msg, []byte(`"method":`))
}

// waitResponses returns once w has written want responses in all, or when
// ctx is done.
func (w *lockedWriter) waitResponses(ctx context.Context, want int64) {
	for w.responses.Load() < want {
		select {
		case <-ctx.Done():
			return
		case <-time.After(answerPoll):
		}
	}
}
