package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeatReader yields n copies of b, without holding them.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := int64(len(p))
	if k > r.n {
		k = r.n
	}
	for i := range p[:k] {
		p[i] = r.b
	}
	r.n -= k
	return int(k), nil
}

// TestFrameLimiterPassesAndDrops: lines up to the limit come out byte for
// byte (CRLF, blank lines, a last line without a newline); a 64 MiB line
// is dropped and reported with its exact size and its id, which comes
// after the bulk, while the limiter's buffer stays near the limit.
func TestFrameLimiterPassesAndDrops(t *testing.T) {
	const limit = 1 << 20
	atLimit := `{"id":1,"pad":"` + strings.Repeat("a", limit-len(`{"id":1,"pad":""}`)) + `"}`
	overLimit := `{"id":2,"pad":"` + strings.Repeat("a", limit+1-len(`{"id":2,"pad":""}`)) + `"}`
	const hugeBulk = 64 << 20
	head, tail := `{"method":"tools/call","params":{"pad":"`, `"},"id":"after"}`
	in := io.MultiReader(
		strings.NewReader("{\"id\":0}\r\n\n"+atLimit+"\n"+overLimit+"\n"+head),
		&repeatReader{b: 'x', n: hugeBulk},
		strings.NewReader(tail+"\n"+`{"id":3}`),
	)
	var got []oversizeFrame
	f := newFrameLimiter(io.NopCloser(in), limit, func(o oversizeFrame) { got = append(got, o) })
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"id\":0}\r\n\n" + atLimit + "\n" + `{"id":3}`; string(out) != want {
		t.Errorf("passed %d bytes, want %d: the lines within the limit, unchanged", len(out), len(want))
	}
	if len(got) != 2 {
		t.Fatalf("refused %d lines, want 2: %+v", len(got), got)
	}
	if got[0].Bytes != limit+1 || string(got[0].ID) != "2" || got[0].Request {
		t.Errorf("first refusal %+v, want %d bytes, id 2, not a request (no method)", got[0], limit+1)
	}
	if want := int64(len(head) + hugeBulk + len(tail)); got[1].Bytes != want || string(got[1].ID) != `"after"` || got[1].Method != "tools/call" || !got[1].Request {
		t.Errorf("second refusal %+v, want %d bytes, id \"after\", a tools/call request", got[1], want)
	}
	if c := cap(f.line); c > 2*limit {
		t.Errorf("limiter buffer grew to %d bytes for a %d-byte line; want it bounded near the limit (%d)", c, hugeBulk, limit)
	}
}

// TestFrameLimiterOversizeLastLine: an oversize line cut off by the end of
// input is reported (no newline to discount) and then EOF.
func TestFrameLimiterOversizeLastLine(t *testing.T) {
	var got []oversizeFrame
	f := newFrameLimiter(io.NopCloser(strings.NewReader(`{"id":9,"method":"m","p":"xxxxxxxx"}`)), 8,
		func(o oversizeFrame) { got = append(got, o) })
	out, err := io.ReadAll(f)
	if err != nil || len(out) != 0 {
		t.Fatalf("read %q, %v; want nothing", out, err)
	}
	if len(got) != 1 || got[0].Bytes != 36 || string(got[0].ID) != "9" {
		t.Fatalf("refusals %+v, want one of 36 bytes with id 9", got)
	}
}

// stdioHarness serves a Server over in-process stdio pipes to the real
// go-sdk client, and lets the test write raw lines into the server's
// stdin between the client's messages (each message is one write under
// the same lock) and collect the server's replies to them: those with an
// id the test registered, or id null, never reach the client.
type stdioHarness struct {
	cs *mcp.ClientSession

	inMu sync.Mutex
	in   *io.PipeWriter

	mu      sync.Mutex
	ids     map[string]chan json.RawMessage // raw id -> the reply line
	refused int                             // replies naming the limit, to anyone
}

type harnessWriter struct{ h *stdioHarness }

func (w harnessWriter) Write(p []byte) (int, error) {
	w.h.inMu.Lock()
	defer w.h.inMu.Unlock()
	return w.h.in.Write(p)
}

func (w harnessWriter) Close() error { return w.h.in.Close() }

func newStdioHarness(t *testing.T, s *Server) *stdioHarness {
	t.Helper()
	h := &stdioHarness{ids: map[string]chan json.RawMessage{}}
	serverIn, in := io.Pipe()
	h.in = in
	serverOut, fromServer := io.Pipe()
	clientIn, toClient := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), serverIn, fromServer) }()
	go h.route(serverOut, toClient)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).
		Connect(context.Background(), &mcp.IOTransport{Reader: clientIn, Writer: harnessWriter{h}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.cs = cs
	t.Cleanup(func() {
		cs.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return h
}

// route reads the server's stdout line by line, keeping the replies the
// test waits for and passing the rest to the client.
func (h *stdioHarness) route(from *io.PipeReader, to *io.PipeWriter) {
	br := bufio.NewReader(from)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(line, &msg)
			h.mu.Lock()
			if bytes.Contains(line, []byte("--max-request-mb")) {
				h.refused++
			}
			ch := h.ids[string(msg.ID)]
			h.mu.Unlock()
			if ch != nil {
				ch <- line
			} else if _, werr := to.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			to.CloseWithError(err)
			return
		}
	}
}

// expect registers a raw id whose reply the test will wait for.
func (h *stdioHarness) expect(id string) chan json.RawMessage {
	ch := make(chan json.RawMessage, 1)
	h.mu.Lock()
	h.ids[id] = ch
	h.mu.Unlock()
	return ch
}

// send writes one raw line into the server's stdin.
func (h *stdioHarness) send(t *testing.T, line string) {
	t.Helper()
	if _, err := (harnessWriter{h}).Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write to the server's stdin: %v", err)
	}
}

func (h *stdioHarness) refusals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

func wait(t *testing.T, ch chan json.RawMessage, what string) json.RawMessage {
	t.Helper()
	select {
	case line := <-ch:
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("no reply to %s", what)
		return nil
	}
}

// toolCall is a raw tools/call line for run_go_code with the id member
// written last, as the TypeScript SDK orders it, and a file padded so the
// line is exactly size bytes.
func toolCall(t *testing.T, id, command string, size int) string {
	t.Helper()
	build := func(pad string) string {
		return `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_go_code","arguments":{"command":` +
			mustJSON(command) + `,"files":{"pad.txt":"` + pad + `"}}},"id":` + id + `}`
	}
	n := size - len(build(""))
	if n < 0 {
		t.Fatalf("a %d-byte call is too small for its envelope", size)
	}
	return build(strings.Repeat("p", n))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

const testRequestLimit = 64 << 10

// TestStdioOversizeCallKeepsSession drives the server with the real go-sdk
// client over stdio pipes: a run_go_code call whose message is over the
// limit gets a JSON-RPC error (-32600, naming the limit and
// --max-request-mb) matched to its call, nothing runs, and the next call
// in the same session finds the sandbox and its files as they were.
func TestStdioOversizeCallKeepsSession(t *testing.T) {
	s, hb := newTestServer(t, Config{MaxRequestBytes: testRequestLimit})
	h := newStdioHarness(t, s)
	out := runOut(t, call(t, h.cs, "run_go_code", map[string]any{
		"files": map[string]any{"keep.txt": "still here\n"}, "command": "true",
	}))

	_, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{
		"files":   map[string]any{"big.txt": strings.Repeat("x", 2*testRequestLimit)},
		"command": "touch ran.txt",
	}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("oversize call: %v (%T), want a JSON-RPC error", err, err)
	}
	if werr.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("code %d, want %d", werr.Code, jsonrpc.CodeInvalidRequest)
	}
	for _, want := range []string{"tools/call", fmt.Sprint(testRequestLimit), "--max-request-mb", "fewer or smaller files"} {
		if !strings.Contains(werr.Message, want) {
			t.Errorf("error message lacks %q: %s", want, werr.Message)
		}
	}
	var data struct {
		LimitBytes   int64 `json:"limit_bytes"`
		MessageBytes int64 `json:"message_bytes"`
	}
	if err := json.Unmarshal(werr.Data, &data); err != nil || data.LimitBytes != testRequestLimit || data.MessageBytes <= 2*testRequestLimit {
		t.Errorf("error data %s: want limit_bytes %d and the message's size", werr.Data, testRequestLimit)
	}

	res := call(t, h.cs, "run_go_code", map[string]any{"command": "cat keep.txt; ls"})
	after := runOut(t, res)
	if res.IsError || after.Stdout != "still here\nkeep.txt\n" || after.SandboxID != out.SandboxID {
		t.Fatalf("call after the refused one: isError=%v %+v; want keep.txt alone in sandbox %s", res.IsError, after, out.SandboxID)
	}
	if n := hb.Opened(); n != 1 {
		t.Errorf("%d sandboxes opened, want the session's one", n)
	}
}

// TestStdioOversizeRawFrames covers what the go-sdk client does not send:
// a line exactly at the limit passes and runs, one byte more is refused;
// string and number ids come back verbatim whether the id comes before or
// after a huge params; an oversize notification gets no reply; the
// session serves the client throughout.
func TestStdioOversizeRawFrames(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxRequestBytes: testRequestLimit})
	h := newStdioHarness(t, s)
	call(t, h.cs, "run_go_code", map[string]any{"command": "true"})

	ch := h.expect(`"at-limit"`)
	h.send(t, toolCall(t, `"at-limit"`, "wc -c < pad.txt", testRequestLimit))
	var ok struct {
		Result *mcp.CallToolResult `json:"result"`
		Error  *jsonrpc.Error      `json:"error"`
	}
	if line := wait(t, ch, "the call at the limit"); json.Unmarshal(line, &ok) != nil || ok.Error != nil || ok.Result == nil || ok.Result.IsError {
		t.Fatalf("a call of exactly %d bytes: %.300s; want it to run", testRequestLimit, line)
	}

	for _, tc := range []struct{ name, id, line string }{
		{"one byte over, string id after params", `"over-by-1"`, toolCall(t, `"over-by-1"`, "touch ran1", testRequestLimit+1)},
		{"number id after params", `900001`, toolCall(t, `900001`, "touch ran2", 3*testRequestLimit)},
		{"escaped string id before params", `"a\"b\\c"`, `{"jsonrpc":"2.0","id":"a\"b\\c","method":"tools/call","params":{"name":"run_go_code","arguments":{"command":"touch ran3","files":{"x":"` +
			strings.Repeat("y", 2*testRequestLimit) + `"}}}}`},
	} {
		ch := h.expect(tc.id)
		h.send(t, tc.line)
		var resp struct {
			ID    json.RawMessage `json:"id"`
			Error *jsonrpc.Error  `json:"error"`
		}
		line := wait(t, ch, tc.name)
		if err := json.Unmarshal(line, &resp); err != nil || resp.Error == nil {
			t.Fatalf("%s: reply %.300s, want a JSON-RPC error", tc.name, line)
		}
		if string(resp.ID) != tc.id || resp.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(resp.Error.Message, fmt.Sprintf("is %d bytes", len(tc.line))) {
			t.Errorf("%s: reply id %s code %d message %q; want id %s, -32600 and the size %d", tc.name, resp.ID, resp.Error.Code, resp.Error.Message, tc.id, len(tc.line))
		}
	}
	if n := h.refusals(); n != 3 {
		t.Fatalf("%d replies named the limit, want 3", n)
	}

	// A notification has no id to answer: nothing comes back, not even
	// with id null (which would end a go-sdk client's session).
	h.expect("null")
	h.send(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"pad":"`+strings.Repeat("z", 2*testRequestLimit)+`"}}`)
	ch = h.expect(`"after-notification"`)
	h.send(t, `{"jsonrpc":"2.0","id":"after-notification","method":"tools/list"}`)
	wait(t, ch, "tools/list after the notification")
	if n := h.refusals(); n != 3 {
		t.Errorf("%d replies named the limit after the oversize notification, want still 3", n)
	}

	res := call(t, h.cs, "run_go_code", map[string]any{"command": "ls"})
	if out := runOut(t, res); res.IsError || out.Stdout != "pad.txt\n" {
		t.Errorf("after the refused calls: %+v; want only the at-limit call's file (none of the refused commands ran)", out)
	}
}

// TestStdioLimitIsMaxRequestBytes: the stdio limit defaults to the same
// 4 MiB as HTTP, and the go-sdk's own line cap is set from it rather than
// its 16 MiB default.
func TestStdioLimitIsMaxRequestBytes(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	if s.cfg.MaxRequestBytes != 4<<20 {
		t.Fatalf("MaxRequestBytes %d, want the 4 MiB default", s.cfg.MaxRequestBytes)
	}
	tr, _ := s.stdioTransport(io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard})
	if tr.MaxLineLength != 4<<20+1 {
		t.Errorf("go-sdk MaxLineLength %d, want the limit plus the newline", tr.MaxLineLength)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
