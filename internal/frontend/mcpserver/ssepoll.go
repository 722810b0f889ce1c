package mcpserver

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SSE polling (SEP-1699, MCP 2025-11-25): over stateful Streamable HTTP
// a tool call still running after Config.SSECloseAfter has its event
// stream closed by the server, with an SSE retry field saying when to come
// back; the client reconnects with Last-Event-ID and the go-sdk replays
// what it missed from the event store, the result included. A call that
// reports progress has its stream closed each time SSECloseAfter passes,
// so none of its responses outlasts that, which proxies and load
// balancers that cut long responses would otherwise do to a go test of
// minutes; a call without a progress token is closed once (below why),
// and its resumed stream then waits for the result. The go-sdk's own way
// is used: CloseSSEStream on the request (RequestExtra).

// sseRetry is the reconnection delay a closed stream asks for.
const sseRetry = 500 * time.Millisecond

// A stream is closed again only once the call has sent an event (a
// progress notification) since its previous close: the client resumes
// with Last-Event-ID and the server replays what came after it, and a
// resumed stream closed before any event reached it leaves the client
// nothing to resume from (the go-sdk v1.8.0 client then fails the call,
// "request terminated without response"). The POST stream has its
// priming event, so the first close is always safe; a call without a
// progress token sends nothing until its result, so its stream is closed
// once. sentEvents, in the call's context, counts what it sent.
type sentEvents struct{ n atomic.Int64 }

type sentEventsKey struct{}

// eventSent notes that the call of ctx sent its client an event.
func eventSent(ctx context.Context) {
	if c, ok := ctx.Value(sentEventsKey{}).(*sentEvents); ok {
		c.n.Add(1)
	}
}

// ResumableVersion reports whether a request of MCP protocol version v
// (its Mcp-Protocol-Version header) got a priming event, so a client can
// resume its stream: 2025-11-25 up to the session-less 2026-07-28, which
// has no resumption. Older clients never get their stream closed: they
// hold no event ID to resume from (the go-sdk closes it for them anyway
// when asked, so the check is ours).
func ResumableVersion(v string) bool {
	return v >= "2025-11-25" && v < "2026-07-28"
}

// ssePollMiddleware closes the streams of long tools/call requests as
// the file's comment says.
func (s *Server) ssePollMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		every := s.cfg.SSECloseAfter
		if method != "tools/call" || every <= 0 || s.cfg.Stateless {
			return next(ctx, method, req)
		}
		extra := req.GetExtra()
		if extra == nil || extra.CloseSSEStream == nil || !ResumableVersion(extra.Header.Get("Mcp-Protocol-Version")) {
			return next(ctx, method, req) // stdio, or a client that cannot resume
		}
		sent := &sentEvents{}
		stop := make(chan struct{})
		defer close(stop)
		go closeEvery(extra.CloseSSEStream, every, sent, stop)
		return next(context.WithValue(ctx, sentEventsKey{}, sent), method, req)
	}
}

// closeEvery closes a call's stream every `every` until stop: the first
// time, then only when the call sent an event since the previous close.
// A close while the client is away (between a close and its
// reconnection) does nothing.
func closeEvery(closeStream func(mcp.CloseSSEStreamArgs), every time.Duration, sent *sentEvents, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if n := sent.n.Load(); n != last {
				last = n
				closeStream(mcp.CloseSSEStreamArgs{RetryAfter: sseRetry})
			}
		}
	}
}

// sseEventNames wraps the go-sdk's Streamable HTTP handler so that the
// priming event and the event sent before the server closes a stream go
// out as MCP's transport text describes them, an event ID or a retry
// field with empty data and no event name (SSE's default type,
// "message"). The go-sdk names them "prime" and "close", which clients
// that dispatch by event type report as unknown (the Python SDK logs
// "Unknown SSE event: prime" on every call). Neither carries data, which
// SSE clients do not dispatch, so dropping the name changes nothing else.
// The go-sdk writes each event with one Write, its name line first.
func sseEventNames(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(unnamedEvents{w}, r)
	})
}

// The go-sdk's event name lines that sseEventNames drops.
var (
	primeEventName = []byte("event: prime\n")
	closeEventName = []byte("event: close\n")
)

// unnamedEvents drops the name line of the go-sdk's priming and closing
// events.
type unnamedEvents struct{ http.ResponseWriter }

func (w unnamedEvents) Write(p []byte) (int, error) {
	for _, name := range [][]byte{primeEventName, closeEventName} {
		if bytes.HasPrefix(p, name) {
			n, err := w.ResponseWriter.Write(p[len(name):])
			return n + len(name), err
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w unnamedEvents) Unwrap() http.ResponseWriter { return w.ResponseWriter }
