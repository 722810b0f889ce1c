package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests cancel a call running `sleep 60` and check that its shell
// is gone: a liveness check with a generous deadline (goneWithin), far
// below the 60 s the command would otherwise run.

// goneWithin is how long a cancelled command's process may take to go.
const goneWithin = 20 * time.Second

// sleeper is a command that writes its shell's pid to pidFile, then
// sleeps for a minute and writes after.
func sleeper(pidFile, after string) string {
	return fmt.Sprintf("echo $$ > %s; sleep 60; touch %s", pidFile, after)
}

// waitPID waits for the pid a sleeper wrote.
func waitPID(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	waitFor(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// waitGone fails the test unless process pid has ended (and been reaped)
// within goneWithin.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(goneWithin)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled command (pid %d) still runs %s later", pid, goneWithin)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawPost POSTs one JSON-RPC message as an MCP client of protocol version
// pv would (session is its Mcp-Session-Id, "" for none), with ctx.
func rawPost(ctx context.Context, url, pv, session, msg string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", pv)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return http.DefaultClient.Do(req)
}

// mustPost is rawPost without a context, failing the test on an error.
func mustPost(t *testing.T, url, pv, session, msg string) *http.Response {
	t.Helper()
	resp, err := rawPost(context.Background(), url, pv, session, msg)
	if err != nil {
		t.Fatalf("POST %s: %v", msg, err)
	}
	return resp
}

// runCall is a tools/call of run_go_code with id 7 running command.
func runCall(command string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_go_code","arguments":{"command":%q}}}`, command)
}

const cancel7 = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}`

// readStream reads resp's body to its end in the background; the channel
// gets all of it.
func readStream(resp *http.Response) <-chan string {
	got := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	return got
}

// A stateless server stops a call whose client cancels it, whichever way
// it does: the go-sdk client (MCP 2026-07-28) cancelling its context
// (its POST's connection drops, and it sends notifications/cancelled), a
// dropped connection alone, and notifications/cancelled alone, after
// which the call's stream ends without an answer.
func TestStatelessCancelKillsCommand(t *testing.T) {
	s, _ := newTestServer(t, Config{Stateless: true})
	url := httpServer(t, s)

	t.Run("go-sdk client", func(t *testing.T) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "pid")
		cs := connectHTTP(t, url)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code",
				Arguments: map[string]any{"command": sleeper(pidFile, filepath.Join(dir, "finished"))}})
			errc <- err
		}()
		pid := waitPID(t, pidFile)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v", err)
		}
		waitGone(t, pid)
		// The client goes on.
		mustOK(t, call(t, cs, "list_sandboxes", map[string]any{}))
	})

	t.Run("dropped connection", func(t *testing.T) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "pid")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			if resp, err := rawPost(ctx, url, "2025-11-25", "", runCall(sleeper(pidFile, filepath.Join(dir, "finished")))); err == nil {
				<-readStream(resp)
			}
		}()
		pid := waitPID(t, pidFile)
		cancel() // drops the connection; no notification follows
		waitGone(t, pid)
	})

	t.Run("notifications/cancelled", func(t *testing.T) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "pid")
		resp := mustPost(t, url, "2025-11-25", "", runCall(sleeper(pidFile, filepath.Join(dir, "finished"))))
		stream := readStream(resp)
		pid := waitPID(t, pidFile)
		if n := mustPost(t, url, "2025-11-25", "", cancel7); n.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: %s", n.Status)
		}
		select {
		case got := <-stream:
			if strings.Contains(got, `"id":7`) {
				t.Fatalf("the cancelled call was answered: %s", got)
			}
		case <-time.After(goneWithin):
			t.Fatalf("the cancelled call's stream still open %s later", goneWithin)
		}
		waitGone(t, pid)
	})
}

// Over stateful HTTP the go-sdk cancels the call (the notification
// reaches its session); the call's stream ends without an answer rather
// than with one reporting the cancellation.
func TestStatefulCancelledCallGetsNoAnswer(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	url := httpServer(t, s)
	const pv = "2025-11-25"
	init := mustPost(t, url, pv, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	<-readStream(init)
	if session == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	mustPost(t, url, pv, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	stream := readStream(mustPost(t, url, pv, session, runCall(sleeper(pidFile, filepath.Join(dir, "finished")))))
	pid := waitPID(t, pidFile)
	if n := mustPost(t, url, pv, session, cancel7); n.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %s", n.Status)
	}
	select {
	case got := <-stream:
		if strings.Contains(got, `"id":7`) {
			t.Fatalf("the cancelled call was answered: %s", got)
		}
	case <-time.After(goneWithin):
		t.Fatalf("the cancelled call's stream still open %s later", goneWithin)
	}
	waitGone(t, pid)
}

// rawClient speaks newline-delimited JSON-RPC to a server over pipes.
type rawClient struct {
	t     *testing.T
	w     io.Writer
	lines *bufio.Scanner
}

func (c *rawClient) send(msg string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, msg+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next is the next message from the server.
func (c *rawClient) next() string {
	c.t.Helper()
	if !c.lines.Scan() {
		c.t.Fatalf("no more messages: %v", c.lines.Err())
	}
	return c.lines.Text()
}

// initialize opens the session and starts a sleeper as call 7; it
// returns the sleeper's pid.
func (c *rawClient) initialize(dir string) int {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	c.next()
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	pidFile := filepath.Join(dir, "pid")
	c.send(runCall(sleeper(pidFile, filepath.Join(dir, "finished"))))
	return waitPID(c.t, pidFile)
}

func newRawClient(t *testing.T, r io.Reader, w io.Writer) *rawClient {
	lines := bufio.NewScanner(r)
	lines.Buffer(nil, 1<<20)
	return &rawClient{t: t, w: w, lines: lines}
}

// Over stdio a cancelled call gets no answer: the go-sdk writes one, and
// the server drops it; the next request is answered.
func TestStdioCancelledCallGetsNoAnswer(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), cr, cw) }()
	t.Cleanup(func() {
		sw.Close()
		go func() { _, _ = io.Copy(io.Discard, sr) }()
		if err := <-done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	c := newRawClient(t, sr, sw)
	pid := c.initialize(t.TempDir())
	c.send(cancel7)
	waitGone(t, pid)
	c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	for {
		msg := c.next()
		if strings.Contains(msg, `"id":7`) {
			t.Fatalf("the cancelled call was answered: %s", msg)
		}
		if strings.Contains(msg, `"id":8`) {
			break
		}
	}
}

// Where a cancelled call's answer still goes out (the go-sdk's own
// transports answer every call), it says the call was cancelled, and
// nothing of what the cut command or transfer reported.
func TestCancelledCallAnswerSaysCancelled(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ss, err := s.MCP().Connect(context.Background(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sw.Close()
		go func() { _, _ = io.Copy(io.Discard, sr) }()
		_ = ss.Wait()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	c := newRawClient(t, sr, sw)
	pid := c.initialize(t.TempDir())
	c.send(cancel7)
	got := c.next()
	if !strings.Contains(got, `"id":7`) || !strings.Contains(got, "cancelled: the client cancelled this call") || strings.Contains(got, "context canceled") {
		t.Fatalf("the cancelled call's answer: %s", got)
	}
	waitGone(t, pid)
}
