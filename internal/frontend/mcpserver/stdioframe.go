package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Over stdio an MCP message is one line of JSON. The go-sdk's IOTransport
// ends the whole session on a line longer than its MaxLineLength, so a
// client that pastes a huge file into run_go_code would lose its sandbox
// session. frameLimiter sits between stdin and the go-sdk and keeps that
// from happening: lines up to the limit pass through unchanged; a longer
// line is read to its end and dropped, never held whole (only its first
// limit bytes are, before the limiter knows the line is too long), while a
// memberScanner picks its "id" and "method" out of the stream, and the
// limiter reports it so the server can answer the request with an error
// carrying the same id. The go-sdk never sees the line, and the session
// goes on.

// stdioReadChunk is how much the limiter reads from stdin at a time.
const stdioReadChunk = 64 << 10

// oversizeFrame describes a line the frameLimiter dropped.
type oversizeFrame struct {
	// Bytes is the line's length in bytes, without its line break.
	Bytes int64
	// ID is the raw JSON id (a string or number) of a request, or nil
	// when the line had no usable id: a notification, a batch, or an id
	// too long or malformed to answer.
	ID json.RawMessage
	// Method is the request's method, "" when unknown or absent (a
	// response to one of the server's own requests).
	Method string
	// Request reports that the line was a JSON object with a "method"
	// member, so a reply to ID is in order.
	Request bool
}

// frameLimiter is an io.ReadCloser over a newline-delimited JSON stream
// that passes lines of at most limit bytes (the line break not counted)
// through unchanged and drops longer ones, calling refuse for each after
// reading it to its end. Memory stays within limit plus one read chunk
// whatever the line length (the line buffer grows to about the limit
// plus a read, with append's slack). Read is not safe for concurrent use (the
// go-sdk reads from one goroutine); Close is, and closes the source.
type frameLimiter struct {
	src    *bufio.Reader
	closer io.Closer
	limit  int64
	refuse func(oversizeFrame)
	// passed, when not nil, is shown each line that passes, before the
	// go-sdk reads it (stdioCancels.read).
	passed func(line []byte)

	line    []byte // the line being gathered, reused
	pending []byte // what Read hands out next: the rest of a line that fit
	err     error  // the source's error, returned once pending is empty
}

func newFrameLimiter(r io.ReadCloser, limit int64, refuse func(oversizeFrame)) *frameLimiter {
	return &frameLimiter{src: bufio.NewReaderSize(r, stdioReadChunk), closer: r, limit: limit, refuse: refuse}
}

func (f *frameLimiter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.nextLine()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *frameLimiter) Close() error { return f.closer.Close() }

// nextLine gathers the next line into pending, or drops it and reports it
// when it is longer than the limit. At the end of input it sets err.
func (f *frameLimiter) nextLine() {
	f.line = f.line[:0]
	for {
		chunk, err := f.src.ReadSlice('\n')
		f.line = append(f.line, chunk...)
		if int64(len(bytes.TrimSuffix(f.line, []byte("\n")))) > f.limit {
			f.drop(err)
			return
		}
		if err == nil || !errors.Is(err, bufio.ErrBufferFull) {
			f.pending, f.err = f.line, err
			if f.passed != nil && len(f.line) > 0 {
				f.passed(f.line)
			}
			return
		}
	}
}

// drop reads the rest of an oversize line, whose start is in f.line,
// feeding it to a memberScanner instead of keeping it, and reports it.
// err is the error of the read that returned the line's last bytes so far.
func (f *frameLimiter) drop(err error) {
	var sc memberScanner
	size := int64(len(f.line))
	sc.Write(f.line)
	f.line = f.line[:0]
	for errors.Is(err, bufio.ErrBufferFull) {
		var chunk []byte
		chunk, err = f.src.ReadSlice('\n')
		size += int64(len(chunk))
		sc.Write(chunk)
	}
	if err == nil { // the line ended with its line break
		size--
	}
	id, _ := sc.requestID()
	f.refuse(oversizeFrame{Bytes: size, ID: id, Method: sc.methodName(), Request: sc.object && sc.hasMethod})
	f.err = err
}

// lockedWriter makes each Write whole with respect to the others. The
// go-sdk's ioConn writes each message in one Write, so wrapping stdout in
// a lockedWriter lets the frameLimiter's replies go to the same stream
// without splitting the go-sdk's messages.
type lockedWriter struct {
	mu        sync.Mutex
	w         io.WriteCloser
	responses atomic.Int64 // JSON-RPC responses written (isResponse), or dropped by keep
	// keep, when not nil, says whether a response goes out: the answer
	// of a call its client cancelled does not (stdioCancels.keep).
	keep func(response []byte) bool
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	response := isResponse(p)
	if response && w.keep != nil && !w.keep(p) {
		w.responses.Add(1)
		return len(p), nil
	}
	n, err := w.w.Write(p)
	if err == nil && response {
		w.responses.Add(1)
	}
	return n, err
}

func (w *lockedWriter) Close() error { return w.w.Close() }

// oversizeReply is the JSON-RPC error response to a request dropped for
// being longer than limit bytes: code -32600 (invalid request), a message
// naming the limit and the way around it, and data with both sizes. f.ID
// must be set.
func oversizeReply(f oversizeFrame, limit int64) []byte {
	what := "this request"
	if f.Method != "" {
		what = fmt.Sprintf("this %s request", f.Method)
	}
	msg := fmt.Sprintf("request too large: %s is %d bytes, over the server's limit of %d bytes (%s) per message, so it was not read and nothing ran; "+
		"send fewer or smaller files per call (write big inputs over several run_go_code calls), or restart the server with a larger --max-request-mb",
		what, f.Bytes, limit, mib(limit))
	data, _ := json.Marshal(struct {
		LimitBytes   int64 `json:"limit_bytes"`
		MessageBytes int64 `json:"message_bytes"`
	}{limit, f.Bytes})
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", f.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg, Data: data}})
	return append(out, '\n')
}

// mib formats a byte count in MiB, as --max-request-mb takes it.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}
