package mcphttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
)

// serveLimited serves h behind Handler with cfg on a loopback listener
// through NewServer and Listen, as mcp-server does, and returns its
// address.
func serveLimited(t *testing.T, h http.Handler, cfg Config) string {
	t.Helper()
	guarded, err := Handler(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(guarded, cfg)
	go srv.Serve(Listen(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// exchange sends one request on conn and reads its answer whole.
func exchange(t *testing.T, conn net.Conn, br *bufio.Reader, headers string) *http.Response {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\n%s\r\n", conn.RemoteAddr(), headers); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// closedByServer reports whether the server closed conn: the next read
// ends with EOF (a generous deadline ends the wait when it does not).
func closedByServer(conn net.Conn, br *bufio.Reader) error {
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("read after the answer: %v; want EOF (the server closed the connection)", err)
	}
	return nil
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })

// TestRefusedConnectionsClose: 300 connections without the token (then
// one with a foreign Origin) get 401 (403) and the server closes each
// (before, all 300 stayed open 70 s later); the refusals are logged at
// most ratelog.OutsideBurst lines.
func TestRefusedConnectionsClose(t *testing.T) {
	var logs syncBuffer
	addr := serveLimited(t, okHandler, Config{Token: "secret", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 301 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		headers, want := "", http.StatusUnauthorized
		if i == 300 {
			headers, want = "Origin: http://evil.example\r\n", http.StatusForbidden
		}
		resp := exchange(t, conn, br, headers)
		if resp.StatusCode != want {
			t.Fatalf("connection %d: %s; want %d", i, resp.Status, want)
		}
		if err := closedByServer(conn, br); err != nil {
			t.Fatalf("connection %d refused with %d: %v", i, want, err)
		}
		conn.Close()
	}
	if n := strings.Count(logs.String(), "mcp http: refused"); n != ratelog.OutsideBurst {
		t.Errorf("301 refusals logged %d lines; want %d:\n%s", n, ratelog.OutsideBurst, logs.String())
	}
}

// TestIdleConnectionCloses: a connection that made a request and then
// sends nothing is closed after IdleTimeout.
func TestIdleConnectionCloses(t *testing.T) {
	addr := serveLimited(t, okHandler, Config{Token: "secret", IdleTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if resp := exchange(t, conn, br, "Authorization: Bearer secret\r\n"); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("authorized request: %s, close %v; want 200 keeping the connection", resp.Status, resp.Close)
	}
	if err := closedByServer(conn, br); err != nil {
		t.Fatalf("idle connection: %v", err)
	}
}

// TestStreamOutlivesIdleTimeout: a response that lasts longer than
// IdleTimeout (an MCP event stream, a long tool call) is not cut.
func TestStreamOutlivesIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("first\n"))
		http.NewResponseController(w).Flush()
		<-release
		w.Write([]byte("second\n"))
	})
	addr := serveLimited(t, stream, Config{IdleTimeout: 50 * time.Millisecond})
	resp, err := http.Get("http://" + addr + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	time.Sleep(20 * 50 * time.Millisecond) // twenty idle timeouts
	close(release)
	if rest, err := io.ReadAll(br); string(rest) != "second\n" || err != nil {
		t.Errorf("after twenty idle timeouts the stream gave %q, %v; want the second line", rest, err)
	}
}

// TestMaxConns: with MaxConns 2, six clients' requests to a handler that
// holds them are served at most two at a time, and all are answered as
// the held ones finish.
func TestMaxConns(t *testing.T) {
	var running, most atomic.Int32
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	hold := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- struct{}{}
		<-release
		running.Add(-1)
		w.Write([]byte("ok"))
	})
	addr := serveLimited(t, hold, Config{MaxConns: 2})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var wg, wrote sync.WaitGroup
	wrote.Add(6)
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Done() }})
	codes := make(chan int, 6)
	for range 6 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(trace, http.MethodGet, "http://"+addr+"/mcp", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	// Once all six are sent (the kernel queues the connections the
	// server does not accept yet), let the held requests go one by one,
	// each once a handler has it.
	wrote.Wait()
	for range 6 {
		<-entered
		release <- struct{}{}
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a request got %d", c)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d requests were served at once with MaxConns 2", m)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestTrickledBodyCloses: a client that sends a request's header and then
// its body a byte at a time, slower than BodyTimeout allows, loses the
// connection (before, it held one of MaxConns for as long as it kept
// trickling); a body sent in time, then a response that outlasts the
// body timeout many times (a long tool call), is served whole.
func TestTrickledBodyCloses(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		<-release
		fmt.Fprintf(w, "got %d bytes", len(body))
	})
	addr := serveLimited(t, h, Config{BodyTimeout: 100 * time.Millisecond})

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\nx", addr); err != nil {
		t.Fatal(err)
	}
	// Keep trickling until the server closes the connection.
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for range 300 {
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, rerr := br.ReadByte()
	var ne net.Error
	if errors.As(rerr, &ne) && ne.Timeout() {
		t.Fatalf("a trickled body still held its connection 30 s later (body timeout 100 ms)")
	}
	<-trickled

	done := make(chan struct{})
	var resp *http.Response
	go func() {
		defer close(done)
		resp, err = http.Post("http://"+addr+"/mcp", "application/json", strings.NewReader(strings.Repeat("y", 500)))
	}()
	time.Sleep(20 * 100 * time.Millisecond) // twenty body timeouts after the body was read
	close(release)
	<-done
	if err != nil {
		t.Fatalf("a long call after its body was read: %v", err)
	}
	defer resp.Body.Close()
	if got, err := io.ReadAll(resp.Body); string(got) != "got 500 bytes" || err != nil {
		t.Errorf("a long call after its body was read got %q, %v; want the whole answer", got, err)
	}
}
