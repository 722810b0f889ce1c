package server

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// unpackExec posts body to /unpack-execute and returns the status and
// the raw answer.
func (ts *testServer) unpackExec(t testing.TB, body any) (int, []byte) {
	t.Helper()
	return ts.post(t, wire.UnpackExecutePath, "application/json", mustJSON(t, body))
}

// TestUnpackExecute: the files land as /unpack puts them (a symlink at a
// file's path replaced, modes kept), then the command runs and sees them;
// the answer is /execute's.
func TestUnpackExecute(t *testing.T) {
	ts := startServer(t, nil)
	if res := ts.run(t, "ln -s /etc/passwd link.go"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	archive := tarOf(t,
		entry{name: "main.go", data: "package main\n"},
		entry{name: "pkg/deep/x.go", data: "package deep\n"},
		entry{name: "run.sh", mode: 0o755, data: "#!/bin/sh\necho ran $1\n"},
		entry{name: "link.go", data: "package main // not passwd\n"},
	)
	code, raw := ts.unpackExec(t, map[string]any{"command": "cat main.go pkg/deep/x.go && ./run.sh \"$X\"", "env": map[string]string{"X": "here"}, "archive": archive})
	var res wire.ExecuteResponse
	if err := json.Unmarshal(raw, &res); code != http.StatusOK || err != nil {
		t.Fatalf("POST %s = %d %s", wire.UnpackExecutePath, code, raw)
	}
	if want := "package main\npackage deep\nran here\n"; res.Stdout != want || res.ExitCode != 0 {
		t.Errorf("stdout %q exit %d (stderr %q); want %q, 0", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	if fi, err := os.Lstat(filepath.Join(ts.Base, "link.go")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link.go: %v, %v; want the symlink replaced by a regular file", fi, err)
	}
	if passwd, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(passwd), "not passwd") {
		t.Fatal("the archive wrote through a symlink to /etc/passwd")
	}
}

// TestUnpackExecuteRefuses: a request that cannot be run whole runs
// nothing: a bad command request writes no file, and files that cannot
// all be written get /unpack's answer and the command does not run.
func TestUnpackExecuteRefuses(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxUploadBytes = 1 << 10 })
	outside := t.TempDir()
	if res := ts.run(t, "ln -s "+outside+" out && mkdir dir"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	good := tarOf(t, entry{name: "fresh.go", data: "package main\n"})
	const ran = "touch ran"
	for _, tc := range []struct {
		name     string
		body     map[string]any
		status   int
		code     wire.ErrorCode
		contains string
	}{
		{"no command", map[string]any{"archive": good}, 422, "", "Field required"},
		{"bad timeout", map[string]any{"command": ran, "timeout_seconds": -1, "archive": good}, 422, "", "timeout_seconds"},
		{"NUL in the command", map[string]any{"command": "touch ran\x00", "archive": good}, 422, "", "NUL"},
		{"dot-dot", map[string]any{"command": ran, "archive": tarOf(t, entry{name: "../evil.go", data: "x"})}, 403, wire.CodePathEscape, "Access denied"},
		{"symlink out on the path", map[string]any{"command": ran, "archive": tarOf(t, entry{name: "out/evil.go", data: "x"})}, 409, wire.CodeConflict, "symlink"},
		{"symlink entry", map[string]any{"command": ran, "archive": tarOf(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"})}, 400, wire.CodeBadRequest, "only regular files"},
		{"directory in the way", map[string]any{"command": ran, "archive": tarOf(t, entry{name: "dir", data: "x"})}, 409, wire.CodeConflict, "directory is in the way"},
		{"over the upload limit", map[string]any{"command": ran, "archive": tarOf(t, entry{name: "a.go", data: strings.Repeat("a", 1100)})}, 413, wire.CodeTooLarge, "a.go"},
		{"over the inline limit", map[string]any{"command": ran, "archive": make([]byte, wire.MaxInlineArchiveBytes+1)}, 413, wire.CodeTooLarge, "/unpack"},
		{"not tar", map[string]any{"command": ran, "archive": []byte("this is not a tar archive, and far too short for one")}, 400, wire.CodeBadRequest, "Malformed tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := ts.unpackExec(t, tc.body)
			if status != tc.status || !strings.Contains(string(raw), tc.contains) {
				t.Errorf("POST %s = %d %s; want %d containing %q", wire.UnpackExecutePath, status, raw, tc.status, tc.contains)
			}
			if tc.code != "" {
				var m wire.Message
				if err := json.Unmarshal(raw, &m); err != nil || m.Code != tc.code {
					t.Errorf("answer %s: want error_code %q", raw, tc.code)
				}
			}
			if _, err := os.Lstat(filepath.Join(ts.Base, "ran")); err == nil {
				t.Fatal("the command ran")
			}
			if tc.status == 422 {
				if _, err := os.Lstat(filepath.Join(ts.Base, "fresh.go")); err == nil {
					t.Fatal("a request refused as a whole wrote its files")
				}
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("files written outside the base directory: %v", ents)
	}
	if _, err := os.Lstat(filepath.Join(ts.Base, "..", "evil.go")); err == nil {
		t.Error("../evil.go was created")
	}
}

// TestUnpackExecuteFreesFileSlot: the request holds a file call's slot
// while it writes its files, not while its command runs: with one slot,
// a listing answers while the command sleeps.
func TestUnpackExecuteFreesFileSlot(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.FileCalls = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := mustJSON(t, map[string]any{"command": "touch started && sleep 600", "archive": tarOf(t, entry{name: "main.go", data: "package main\n"})})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+wire.UnpackExecutePath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for {
		if _, err := os.Stat(filepath.Join(ts.Base, "started")); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatal("the request ended before its command started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The listing waits for the slot only if the running command holds it:
	// then it would wait until the command's end, 600 s away.
	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	defer lcancel()
	lreq, _ := http.NewRequestWithContext(lctx, http.MethodGet, ts.URL+"/list/.", nil)
	resp, err := http.DefaultClient.Do(lreq)
	if err != nil {
		t.Fatalf("GET /list/. while the command runs: %v (the command holds the file slot)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /list/. = %d", resp.StatusCode)
	}
	cancel()
	<-done
}
