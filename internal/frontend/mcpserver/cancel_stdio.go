package mcpserver

import (
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// stdioCancels keeps the answer of a call its client cancelled from going
// out over stdio (MCP: the receiver SHOULD NOT send a response for a
// cancelled request). The go-sdk cancels the call on notifications/cancelled
// but writes an answer for every call all the same; over HTTP the call's
// stream is shut instead (cancel.go). It sees each line the frameLimiter
// passes (read) and each response the go-sdk writes (keep), and tracks
// the calls read and not yet answered, by id: a cancellation naming one
// of them marks it, and its answer is dropped. A cancellation naming
// anything else (an unknown id, a call already answered) is ignored, so
// an id the client uses again later is not caught by it.
type stdioCancels struct {
	mu   sync.Mutex
	open map[jsonrpc.ID]bool // unanswered calls: true once cancelled
}

func newStdioCancels() *stdioCancels {
	return &stdioCancels{open: map[jsonrpc.ID]bool{}}
}

// read notes a call, or a cancellation of an open one, in one line the
// client sent.
func (c *stdioCancels) read(line []byte) {
	var sc memberScanner
	_, _ = sc.Write(line)
	method := sc.methodName()
	if raw, ok := sc.requestID(); ok && method != "" {
		if id, ok := makeID(raw); ok {
			c.mu.Lock()
			c.open[id] = false
			c.mu.Unlock()
		}
		return
	}
	if method != "notifications/cancelled" {
		return
	}
	var n struct {
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return
	}
	id, err := jsonrpc.MakeID(n.Params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.open[id]; ok {
		c.open[id] = true
	}
}

// keep reports whether a response (as isResponse tells one) goes out: not
// when it answers a call its client cancelled. Either way the call is
// answered, and forgotten.
func (c *stdioCancels) keep(response []byte) bool {
	// The go-sdk writes the id first ({"jsonrpc":"2.0","id":...): a
	// prefix holding the longest id the scanner keeps is enough.
	var sc memberScanner
	_, _ = sc.Write(response[:min(len(response), len(`{"jsonrpc":"2.0","id":,`)+maxIDBytes)])
	raw, ok := sc.requestID()
	if !ok {
		return true
	}
	id, ok := makeID(raw)
	if !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cancelled := c.open[id]
	delete(c.open, id)
	return !cancelled
}
