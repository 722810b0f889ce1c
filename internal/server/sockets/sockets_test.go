package sockets

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListen: a stale socket file is replaced and its directory created;
// a regular file in the way and an address without a port are refused
// with errors that say so; String gives back the form Listen takes.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sub", "s.sock")
	stale, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // leaves the socket file behind, as a killed process would
	l, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if got := String(l); got != "unix:"+sock {
		t.Errorf("String = %q", got)
	}
	l.Close()

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix:" + file); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("the regular file was touched: %q", b)
	}
	if _, err := Listen("no-port-here"); err == nil || !strings.Contains(err.Error(), "want host:port or unix:/path") {
		t.Errorf("bad address: %v", err)
	}
	tcp, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	if !strings.HasPrefix(String(tcp), "127.0.0.1:") {
		t.Errorf("String = %q", String(tcp))
	}
}
