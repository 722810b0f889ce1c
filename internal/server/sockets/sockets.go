// Package sockets opens the listeners of the runtime server and of its
// process API companion from an address string. It links nothing but the
// standard library, so the lean server and the companion share it.
package sockets

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Listen opens a listener for addr: "unix:/path/to.sock" (a stale socket
// file at that path is replaced, its directory created) or "host:port" on
// TCP (port 0 picks a free one). Errors name addr and what is wrong with it.
//
// A unix socket is made connectable by every uid (mode 0666): who may
// reach it is its directory's to decide. The local backend's host side
// may be another uid than the server's (a user whose sandboxes run as
// subordinate uids of their own), and the sandbox's run directory is
// closed to everyone else.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, fmt.Errorf("listen %q: empty unix socket path", addr)
		}
		if fi, err := os.Lstat(path); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, fmt.Errorf("listen %q: %s exists and is not a socket", addr, path)
			}
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("listen %q: remove stale socket: %w", addr, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("listen %q: %w", addr, err)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %q: %w", addr, err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			l.Close()
			return nil, fmt.Errorf("listen %q: open the socket to its directory's users: %w", addr, err)
		}
		return l, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen %q: want host:port or unix:/path: %w", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	return l, nil
}

// String is l's address in the form Listen takes: "unix:/path" or
// "host:port".
func String(l net.Listener) string {
	if l.Addr().Network() == "unix" {
		return "unix:" + l.Addr().String()
	}
	return l.Addr().String()
}
