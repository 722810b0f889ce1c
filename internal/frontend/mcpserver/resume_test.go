package mcpserver

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
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
