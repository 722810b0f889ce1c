package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client cancellation over Streamable HTTP.
//
// A call's answer goes out on the POST that carried it. Each POST gets a
// callStream: a context of its own, under the HTTP request's, and a gate
// on its ResponseWriter. A notifications/cancelled naming a call whose
// POST is still open (same bearer token, same MCP session: none on a
// stateless server) ends that POST: the gate shuts, so not one more byte
// of the call's stream, its answer included, reaches the client (MCP: the
// receiver SHOULD NOT send a response for a cancelled request), and its
// context is cancelled, so the go-sdk ends the response.
//
// On a stateless server a call lives exactly as long as its POST:
// callStreams.middleware ends the call's context with the POST's, so a
// notifications/cancelled or a dropped connection (MCP 2026-07-28: closing
// the response stream is the cancellation) stops the command and lets go
// of the sandbox. The go-sdk cannot do this alone: each stateless POST is
// a session of its own, so a notifications/cancelled POSTed apart lands in
// a session that never saw the call (its handler may not even see the
// notification: that session closes once it answered 202), and it ties a
// handler to its HTTP request only for 2026-07-28 requests with
// StreamableHTTPOptions.PropagateRequestCancellation, not for older
// clients served statelessly, which can resume nothing here either.
//
// Over stateful HTTP the go-sdk cancels the call itself (the notification
// reaches the call's session); a dropped connection is no cancellation
// there, since the client may resume the stream (MCP 2025-11-25).

// errCancelled is the cause of a stateless call stopped with its POST.
var errCancelled = errors.New("the client cancelled the call or closed its connection")

// cancelledMessage is the answer of a tools/call whose client cancelled
// it, where one still goes out (the go-sdk answers every call): over
// stateful HTTP when the answer goes to a stream other than the call's
// POST (one resumed with Last-Event-ID), or over a go-sdk transport
// connected to Server.MCP(); ServeStdio drops it (stdioCancels). It
// replaces the tool's own answer, which would report the cancellation as
// a failure of whatever command or transfer it cut ("context canceled").
const cancelledMessage = "cancelled: the client cancelled this call before it finished; its command, if one ran, was killed."

// cancelHeadBytes is how much of a POST body is kept to read a
// notifications/cancelled's requestId; a longer one is not looked at.
const cancelHeadBytes = 4 << 10

// streamKey names a call among the open POSTs: a cancellation must come
// with the same bearer token and MCP session as the call.
type streamKey struct {
	user    string // the token's principal (TokenInfo.UserID), "" without auth
	session string // Mcp-Session-Id; "" on a stateless server
	id      jsonrpc.ID
}

// callStreams tracks the POSTs carrying a call, by streamKey.
type callStreams struct {
	stateless bool
	log       *slog.Logger

	mu   sync.Mutex
	open map[streamKey][]*callStream
}

func newCallStreams(stateless bool, log *slog.Logger) *callStreams {
	return &callStreams{stateless: stateless, log: log, open: map[streamKey][]*callStream{}}
}

// callStream is one POST's: its context and its gated writer.
type callStream struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	w      *gatedWriter
}

// stop shuts the POST's writer, then ends its context with cause.
func (c *callStream) stop(cause error) {
	c.w.shut()
	c.cancel(cause)
}

type callStreamKey struct{}

// handler wraps the go-sdk's Streamable HTTP handler: every POST is served
// with a callStream in its context and its body watched, and, once the
// body is read, a call is entered under its streamKey until the POST
// ends, and a notifications/cancelled stops the POST of the call it names.
func (t *callStreams) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		key := streamKey{}
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			key.user = ti.UserID
		}
		if !t.stateless {
			key.session = r.Header.Get("Mcp-Session-Id")
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		cs := &callStream{ctx: ctx, cancel: cancel, w: &gatedWriter{ResponseWriter: w}}
		entered := false
		body := &watchedBody{ReadCloser: r.Body}
		// The go-sdk reads the body whole before it hands the message on,
		// so a call is entered before its handler runs, and a cancellation
		// stops its call's POST before the go-sdk cancels the call.
		body.ended = func() {
			method := body.scan.methodName()
			if id, ok := body.scan.requestID(); ok && method != "" {
				if key.id, ok = makeID(id); ok {
					t.enter(key, cs)
					entered = true
				}
				return
			}
			if method == "notifications/cancelled" && len(body.head) <= cancelHeadBytes {
				t.cancelNamed(key, body.head)
			}
		}
		r = r.WithContext(context.WithValue(ctx, callStreamKey{}, cs))
		r.Body = body
		next.ServeHTTP(cs.w, r)
		if entered {
			t.leave(key, cs)
		}
	})
}

func (t *callStreams) enter(k streamKey, cs *callStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open[k] = append(t.open[k], cs)
}

func (t *callStreams) leave(k streamKey, cs *callStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rest := t.open[k][:0]
	for _, c := range t.open[k] {
		if c != cs {
			rest = append(rest, c)
		}
	}
	if len(rest) == 0 {
		delete(t.open, k)
		return
	}
	t.open[k] = rest
}

// cancelNamed stops the POST of the call a notifications/cancelled (msg,
// the whole message) names, under k's token and session. A name that
// fits no open POST, or several (two clients of one token on a stateless
// server, each with its own call of that id), is ignored, as MCP allows:
// which one was meant cannot be told.
func (t *callStreams) cancelNamed(k streamKey, msg []byte) {
	var n struct {
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil {
		return
	}
	id, err := jsonrpc.MakeID(n.Params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	k.id = id
	t.mu.Lock()
	open := t.open[k]
	var cs *callStream
	if len(open) == 1 {
		cs = open[0]
	}
	t.mu.Unlock()
	if cs == nil {
		t.log.Debug("notifications/cancelled names no single open call; ignored", "request_id", id.Raw(), "open", len(open))
		return
	}
	cs.stop(errCancelled)
}

// makeID is the JSON-RPC id of a raw JSON string or number.
func makeID(raw json.RawMessage) (jsonrpc.ID, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

// middleware stops a stateless server's tools/call with its POST, and
// answers a call its client cancelled with cancelledMessage, on every
// transport. A call stopped by shutdown is left to inflight's answer.
func (t *callStreams) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		// A stateless session's context carries its one POST's callStream
		// (a stateful session's carries its initialize POST's: not used).
		if cs, ok := ctx.Value(callStreamKey{}).(*callStream); ok && t.stateless {
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			defer context.AfterFunc(cs.ctx, func() { cancel(errCancelled) })()
		}
		res, err := next(ctx, method, req)
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errShuttingDown) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: cancelledMessage}}}, nil
		}
		return res, err
	}
}

// gatedWriter is a POST's ResponseWriter that writes nothing once shut.
// Its lock is held across each write, so after shut returns no write is
// under way or to come.
type gatedWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	closed bool
}

// errStreamShut is what a write to a shut gatedWriter returns.
var errStreamShut = errors.New("the call's stream was closed: its client cancelled it")

func (w *gatedWriter) shut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errStreamShut
	}
	return w.ResponseWriter.Write(p)
}

func (w *gatedWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.ResponseWriter.WriteHeader(code)
	}
}

// FlushError flushes what was written (http.ResponseController calls it).
func (w *gatedWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errStreamShut
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watchedBody is a POST's body as the go-sdk reads it: its "id" and
// "method" are scanned as they pass and its first cancelHeadBytes+1 bytes
// kept; ended runs once, when the body was read to its end.
type watchedBody struct {
	io.ReadCloser
	scan  memberScanner
	head  []byte
	done  bool
	ended func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	_, _ = b.scan.Write(p[:n])
	if keep := min(n, cancelHeadBytes+1-len(b.head)); keep > 0 {
		b.head = append(b.head, p[:keep]...)
	}
	if err == io.EOF && !b.done {
		b.done = true
		b.ended()
	}
	return n, err
}
