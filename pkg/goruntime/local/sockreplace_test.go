package local_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// socketSymlinkAttack: a command replaces the server's sockets in its
// /run/sandbox with symlinks to a socket on the host. The host must not
// follow them when it dials again (here: an Attach): the host socket gets
// no connection, and the Attach fails saying the socket is a symlink. s
// cannot be attached to after this.
func socketSymlinkAttack(b *local.Backend, s *goruntime.Session) findings {
	var f findings
	probeDir, err := os.MkdirTemp("", "probe")
	if err != nil {
		f.add("%v", err)
		return f
	}
	defer os.RemoveAll(probeDir)
	probe := filepath.Join(probeDir, "host.sock")
	ln, err := net.Listen("unix", probe)
	if err != nil {
		f.add("%v", err)
		return f
	}
	defer ln.Close()
	reached := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			reached <- struct{}{}
			c.Close()
		}
	}()
	if f.mustOK(s, goruntime.Request{Command: "rm -f /run/sandbox/server.sock /run/sandbox/sandboxd.sock && ln -s " + probe + " /run/sandbox/server.sock && ln -s " + probe + " /run/sandbox/sandboxd.sock"}) == nil {
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if sb, err := b.Attach(ctx, s.ID()); err == nil {
		_, err = sb.Exec(ctx, goruntime.ExecRequest{Command: "echo hi"})
		f.add("attach through a symlinked socket worked; exec: %v", err)
	} else if !strings.Contains(err.Error(), "symlink") {
		f.add("attach through a symlinked socket: %v, want an error saying the socket is a symlink", err)
	}
	select {
	case <-reached:
		f.add("the host dialled the socket a sandbox's symlink named")
	case <-time.After(200 * time.Millisecond):
	}
	return f
}

func TestServerSocketReplacedWithSymlink(t *testing.T) {
	b := newBackend(t, testOptions())
	check(t, socketSymlinkAttack(b, openSession(t, b)))
}

// fakeServer replaces the runtime server's socket with its own, which
// answers every request with a 200 and an endless body.
const fakeServer = `package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"bytes"
)

func main() {
	os.Remove("/run/sandbox/server.sock")
	os.Remove("/run/sandbox/sandboxd.sock")
	ln, err := net.Listen("unix", "/run/sandbox/server.sock")
	if err != nil {
		panic(err)
	}
	// Connectable by the host side, which may be another uid (a user's
	// backend whose sandboxes run as subordinate uids), as the real one is.
	if err := os.Chmod("/run/sandbox/server.sock", 0o666); err != nil {
		panic(err)
	}
	chunk := bytes.Repeat([]byte("A"), 64<<10)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"stdout\":\""))
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
}
`

// TestFakeServerAnswerBounded: a command puts a server of its own in place
// of the runtime server, answering with an endless body. The host reads a
// bounded part of it and fails the call with an error that says so, in
// seconds, instead of reading (and holding) without end.
func TestFakeServerAnswerBounded(t *testing.T) {
	opts := testOptions()
	opts.OutputBytes = 64 << 10
	b := newBackend(t, opts)
	s := openSession(t, b)
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "fake/main.go", Data: []byte(fakeServer)}},
		Command: "cd fake && go mod init fake >/dev/null 2>&1; go build -o /tmp/fake . && (setsid /tmp/fake </dev/null >/dev/null 2>&1 &) && sleep 1 && test -S /run/sandbox/server.sock"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	sb, err := b.Attach(ctx, s.ID())
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	_, err = sb.Exec(ctx, goruntime.ExecRequest{Command: "echo real"})
	if err == nil || !strings.Contains(err.Error(), "larger than any it sends") {
		t.Fatalf("exec against a server with an endless answer: %v, want the answer-too-large error", err)
	}
	// Bounded by the client, not by the caller's deadline.
	if ctx.Err() != nil {
		t.Errorf("the read ended only at the caller's deadline, after %v", time.Since(start))
	}
}
