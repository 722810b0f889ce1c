package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cutOnce drops the response stream of the first tools/call POST once it
// has delivered its first event (the priming event), as a network that
// fails mid-call would; it counts GETs that resume with Last-Event-ID.
type cutOnce struct {
	cut     atomic.Bool
	resumed atomic.Int32
}

func (c *cutOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.resumed.Add(1)
	}
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !bytes.Contains(body, []byte(`"tools/call"`)) || !c.cut.CompareAndSwap(false, true) {
		return resp, err
	}
	resp.Body = &cutAfterFirstEvent{rc: resp.Body}
	return resp, nil
}

// cutAfterFirstEvent passes bytes up to the end of the first SSE event,
// then fails as a dropped connection does.
type cutAfterFirstEvent struct {
	rc   io.ReadCloser
	seen []byte
	done bool
}

func (c *cutAfterFirstEvent) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.rc.Read(p)
	c.seen = append(c.seen, p[:n]...)
	if i := bytes.Index(c.seen, []byte("\n\n")); i >= 0 {
		keep := n - (len(c.seen) - (i + 2))
		c.done = true
		c.rc.Close()
		return keep, nil
	}
	return n, err
}

func (c *cutAfterFirstEvent) Close() error { return c.rc.Close() }

// A client whose stream drops during a long call reconnects with
// Last-Event-ID and still gets the call's result (the server keeps its
// streams' events, bounded: Config.EventStoreBytes).
func TestResultSurvivesADroppedStream(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	url := httpServer(t, s)
	rt := &cutOnce{}
	cs := connectWith(t, url, &http.Client{Transport: rt})
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s; resumption needs 2025-11-25", v)
	}
	run := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"command": "sleep 1; echo finished"})))
	if !rt.cut.Load() {
		t.Fatal("the stream was never cut: the test tested nothing")
	}
	if strings.TrimSpace(run.Stdout) != "finished" {
		t.Fatalf("result after the drop: %+v", run)
	}
	if rt.resumed.Load() == 0 {
		t.Error("the client got its result without resuming (GET with Last-Event-ID)")
	}
}

// watch records what a client's HTTP exchanges carry: whether a tools/call
// response stream had an SSE retry field, and how many GETs resumed a
// stream with Last-Event-ID. With version set, it sends tools/call POSTs
// with that Mcp-Protocol-Version header (an older client).
type watch struct {
	version string
	retry   atomic.Bool
	resumed atomic.Int32
}

func (w *watch) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		w.resumed.Add(1)
	}
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	isCall := bytes.Contains(body, []byte(`"tools/call"`))
	if isCall && w.version != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Mcp-Protocol-Version", w.version)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !(isCall || r.Method == http.MethodGet) {
		return resp, err
	}
	resp.Body = &retrySpy{rc: resp.Body, w: w}
	return resp, nil
}

// retrySpy notes an SSE retry field in a response stream.
type retrySpy struct {
	rc   io.ReadCloser
	w    *watch
	tail []byte
}

func (s *retrySpy) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	s.tail = append(s.tail, p[:n]...)
	if bytes.Contains(s.tail, []byte("\nretry:")) || bytes.HasPrefix(s.tail, []byte("retry:")) {
		s.w.retry.Store(true)
	}
	if len(s.tail) > 16 {
		s.tail = s.tail[len(s.tail)-16:]
	}
	return n, err
}

func (s *retrySpy) Close() error { return s.rc.Close() }

// A call running longer than Config.SSECloseAfter has its stream closed
// by the server with an SSE retry field; the go-sdk client reconnects
// with Last-Event-ID and gets the result from the event store. Without a
// progress token no event passes after the close, so the resumed stream
// is not closed again: the go-sdk client fails a call whose resumed
// stream ends before any event ("request terminated without response").
func TestLongCallStreamClosedAndResumed(t *testing.T) {
	s, _ := newTestServer(t, Config{SSECloseAfter: 150 * time.Millisecond})
	url := httpServer(t, s)
	w := &watch{}
	cs := connectWith(t, url, &http.Client{Transport: w})
	run := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"command": "sleep 4; echo finished"})))
	if strings.TrimSpace(run.Stdout) != "finished" {
		t.Fatalf("result across closed streams: %+v", run)
	}
	if !w.retry.Load() {
		t.Error("the closed stream carried no SSE retry field")
	}
	if n := w.resumed.Load(); n != 1 {
		t.Errorf("the client resumed %d times, want 1 (a call without progress is closed once)", n)
	}
	// A short call is not touched: shorter than an hour (150 ms, as
	// above, is longer than a busy machine may take to run true).
	long, _ := newTestServer(t, Config{SSECloseAfter: time.Hour})
	w2 := &watch{}
	cs2 := connectWith(t, httpServer(t, long), &http.Client{Transport: w2})
	mustOK(t, call(t, cs2, "run_go_code", map[string]any{"command": "true"}))
	if n := w2.resumed.Load(); n != 0 {
		t.Errorf("a call shorter than --sse-close-after resumed %d times", n)
	}
}

// With a progress token, progress events pass between closes: the stream
// is closed again each time SSECloseAfter passes (the resumed stream has
// an event to resume from), the client follows, and gets its progress
// and result.
func TestLongCallWithProgressKeepsClosing(t *testing.T) {
	s, _ := newTestServer(t, Config{SSECloseAfter: 150 * time.Millisecond, ProgressInterval: 50 * time.Millisecond})
	url := httpServer(t, s)
	w := &watch{}
	var progress atomic.Int32
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: w}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	params := &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "sleep 5; echo finished"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if run := runOut(t, mustOK(t, res)); strings.TrimSpace(run.Stdout) != "finished" {
		t.Fatalf("result: %+v", run)
	}
	if n := w.resumed.Load(); n < 3 {
		t.Errorf("the client resumed %d times in 5 s with --sse-close-after=150ms and progress, want 3 or more", n)
	}
	if progress.Load() == 0 {
		t.Error("no progress notification reached the client across the closes")
	}
}

// A client speaking an older protocol (no priming event, so nothing to
// resume from) never has its stream closed: it gets the result on the
// POST it made.
func TestOlderClientStreamNotClosed(t *testing.T) {
	s, _ := newTestServer(t, Config{SSECloseAfter: 100 * time.Millisecond})
	url := httpServer(t, s)
	w := &watch{version: "2025-06-18"}
	cs := connectWith(t, url, &http.Client{Transport: w})
	run := runOut(t, mustOK(t, call(t, cs, "run_go_code", map[string]any{"command": "sleep 1; echo finished"})))
	if strings.TrimSpace(run.Stdout) != "finished" {
		t.Fatalf("result: %+v", run)
	}
	if w.retry.Load() || w.resumed.Load() != 0 {
		t.Errorf("a 2025-06-18 request's stream was closed (retry %v, resumed %d)", w.retry.Load(), w.resumed.Load())
	}
}
