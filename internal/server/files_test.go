package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDownloadSpecialFiles: a named pipe, a socket and a directory are
// refused at once with 404 and a message naming what the path is; before
// the fix, opening the pipe blocked the request until a writer appeared.
func TestDownloadSpecialFiles(t *testing.T) {
	ts := startServer(t, nil)
	res := ts.run(t, "mkfifo fifo && mkdir dir && ln -s fifo fifolink && printf x > plain")
	if res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for name, want := range map[string]string{
		"fifo":     "named pipe",
		"fifolink": "named pipe",
		"dir":      "directory",
	} {
		start := time.Now()
		resp, err := client.Get(ts.URL + "/download/" + name)
		if err != nil {
			// Release the handler stuck in open(2) by opening the pipe's
			// other end, so the server can shut down and the test ends.
			if w, werr := os.OpenFile(filepath.Join(ts.Base, "fifo"), os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
				w.Close()
			}
			t.Fatalf("GET /download/%s: %v (after %s; the server blocked opening it)", name, err, time.Since(start).Round(time.Millisecond))
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(string(body), `{"message":"File not found: `) || !strings.Contains(string(body), want) {
			t.Errorf("GET /download/%s = %d %s, want 404 with a message starting \"File not found: \" and naming %q", name, resp.StatusCode, body, want)
		}
	}
	// A regular file beside them still downloads.
	if code, body := ts.get(t, "/download/plain"); code != 200 || string(body) != "x" {
		t.Errorf("GET /download/plain = %d %q, want 200 \"x\"", code, body)
	}
}

// TestEscapeReasonNamesSymlink: a name refused because a symlink leads
// out of the base keeps upstream's message and says which symlink in
// "reason"; a plain ".." escape has no reason.
func TestEscapeReasonNamesSymlink(t *testing.T) {
	ts := startServer(t, nil)
	if res := ts.run(t, "ln -s /etc/passwd pw && ln -s ../.. up && mkdir d"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	for path, want := range map[string]string{
		"/download/pw":      `{"message":"Access denied","error_code":"path_escape","reason":"pw is a symlink to /etc/passwd, outside the base directory"}`,
		"/list/up/etc":      `{"message":"Access denied","error_code":"path_escape","reason":"up is a symlink to ../.., outside the base directory"}`,
		"/exists/d/..%2F..": `{"message":"Access denied","error_code":"path_escape"}`,
	} {
		code, body := ts.get(t, path)
		if code != 403 || strings.TrimSpace(string(body)) != want {
			t.Errorf("GET %s = %d %s, want 403 %s", path, code, body, want)
		}
	}
}
