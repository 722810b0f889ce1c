package local

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDialSandboxSocket: the host dials a sandbox's socket only when the
// path itself is a socket of the sandbox's uid, and reaches that socket,
// not whatever a symlink in its place names.
func TestDialSandboxSocket(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) (string, <-chan string) {
		p := filepath.Join(dir, name)
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		got := make(chan string, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				got <- name
				c.Close()
			}
		}()
		return p, got
	}
	server, fromServer := listen("server.sock")
	other, fromOther := listen("other.sock")
	ctx := context.Background()
	me := os.Geteuid()

	c, err := dialSandboxSocket(ctx, server, me)
	if err != nil {
		t.Fatalf("dial the server's own socket: %v", err)
	}
	c.Close()
	if who := <-fromServer; who != "server.sock" {
		t.Fatalf("reached %s", who)
	}

	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		uid        int
	}{
		{"a symlink to another socket", link, me},
		{"a regular file", plain, me},
		{"a socket of another uid", server, me + 1},
	} {
		conn, err := dialSandboxSocket(ctx, c.path, c.uid)
		if err == nil {
			conn.Close()
			t.Errorf("%s: dialled", c.name)
			continue
		}
		if !errors.Is(err, errNotServerSocket) {
			t.Errorf("%s: %v, want errNotServerSocket", c.name, err)
		}
	}
	select {
	case who := <-fromOther:
		t.Errorf("the symlink's target %s was reached", who)
	default:
	}
	if _, err := dialSandboxSocket(ctx, filepath.Join(dir, "missing.sock"), me); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing socket: %v, want ErrNotExist", err)
	}
}
