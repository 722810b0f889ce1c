package server

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

type entry struct {
	name string
	typ  byte
	mode int64
	data string
	link string
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Size: int64(len(e.data)), Linkname: e.link}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (ts *testServer) unpack(t *testing.T, archive []byte) (int, wire.Message) {
	t.Helper()
	code, body := ts.post(t, "/unpack", "application/x-tar", archive)
	var m wire.Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("POST /unpack = %d %s: not a wire.Message", code, body)
	}
	return code, m
}

// TestUnpack: an archive lands as tar -x would put it: nested parents
// created, modes kept, existing files replaced, a symlink at a file's
// path replaced rather than written through.
func TestUnpack(t *testing.T) {
	ts := startServer(t, nil)
	if res := ts.run(t, "printf old > main.go && chmod 600 main.go && ln -s /etc/passwd link.go"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	code, m := ts.unpack(t, tarOf(t,
		entry{name: "main.go", data: "package main\n"},
		entry{name: "pkg/deep/x.go", data: "package deep\n"},
		entry{name: "run.sh", mode: 0o755, data: "#!/bin/sh\n"},
		entry{name: "link.go", data: "package main // not passwd\n"},
		entry{name: "empty/", typ: tar.TypeDir, mode: 0o755},
	))
	if code != http.StatusOK || m.Message != "Unpacked 4 files." {
		t.Fatalf("POST /unpack = %d %+v", code, m)
	}
	for name, want := range map[string]string{"main.go": "package main\n", "pkg/deep/x.go": "package deep\n", "link.go": "package main // not passwd\n"} {
		got, err := os.ReadFile(filepath.Join(ts.Base, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	for name, want := range map[string]os.FileMode{"main.go": 0o644, "run.sh": 0o755, "link.go": 0o644} {
		fi, err := os.Lstat(filepath.Join(ts.Base, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want a regular file %v", name, fi.Mode(), err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(ts.Base, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty/: %v, %v; want a directory", fi, err)
	}
	if passwd, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(passwd), "not passwd") {
		t.Fatal("the archive wrote through a symlink to /etc/passwd")
	}
	left, _ := filepath.Glob(filepath.Join(ts.Base, ".*upload-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestUnpackRefuses: bad archives get their own answer and write nothing
// outside the base directory.
func TestUnpackRefuses(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxUploadBytes = 1 << 10 })
	outside := t.TempDir()
	if res := ts.run(t, "ln -s "+outside+" out && mkdir dir && printf x > file"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	for _, tc := range []struct {
		name     string
		archive  []byte
		ctype    string
		status   int
		code     wire.ErrorCode
		contains string
	}{
		{"dot-dot", tarOf(t, entry{name: "../evil.go", data: "x"}), "", 403, wire.CodePathEscape, "Access denied"},
		{"dot-dot inside", tarOf(t, entry{name: "a/../../evil.go", data: "x"}), "", 403, wire.CodePathEscape, "Access denied"},
		{"symlink out on the path", tarOf(t, entry{name: "out/evil.go", data: "x"}), "", 409, wire.CodeConflict, "symlink"},
		{"symlink entry", tarOf(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"}), "", 400, wire.CodeBadRequest, "only regular files"},
		{"hard link entry", tarOf(t, entry{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}), "", 400, wire.CodeBadRequest, "only regular files"},
		{"device entry", tarOf(t, entry{name: "d", typ: tar.TypeChar}), "", 400, wire.CodeBadRequest, "only regular files"},
		{"directory in the way", tarOf(t, entry{name: "dir", data: "x"}), "", 409, wire.CodeConflict, "directory is in the way"},
		{"file in the way", tarOf(t, entry{name: "file/x.go", data: "x"}), "", 409, wire.CodeConflict, "needs a directory"},
		{"over the limit", tarOf(t, entry{name: "a.go", data: strings.Repeat("a", 600)}, entry{name: "b.go", data: strings.Repeat("b", 600)}), "", 413, wire.CodeTooLarge, "b.go"},
		{"not tar", []byte("hello, this is not a tar archive at all, it is far too short"), "", 400, wire.CodeBadRequest, "Malformed tar"},
		{"truncated", tarOf(t, entry{name: "t.go", data: strings.Repeat("t", 700)})[:800], "", 400, wire.CodeBadRequest, "Malformed tar"},
		{"wrong type", tarOf(t, entry{name: "a.go", data: "x"}), "application/octet-stream", 415, wire.CodeBadRequest, "application/x-tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctype := tc.ctype
			if ctype == "" {
				ctype = "application/x-tar"
			}
			status, body := ts.post(t, "/unpack", ctype, tc.archive)
			var m wire.Message
			_ = json.Unmarshal(body, &m)
			if status != tc.status || m.Code != tc.code || !strings.Contains(m.Message, tc.contains) {
				t.Errorf("POST /unpack = %d %s; want %d %s containing %q", status, body, tc.status, tc.code, tc.contains)
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("files written outside the base directory: %v", ents)
	}
	for _, name := range []string{"evil.go", filepath.Join("..", "evil.go"), "l", "h", "d"} {
		if _, err := os.Lstat(filepath.Join(ts.Base, name)); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}

// TestWriteThroughSymlinkLoop: a symlink loop a command planted on a
// file's path is a 409 naming it, for /unpack and /upload alike (it was a
// 500).
func TestWriteThroughSymlinkLoop(t *testing.T) {
	ts := startServer(t, nil)
	if res := ts.run(t, "ln -s loop1 loop2 && ln -s loop2 loop1"); res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	code, m := ts.unpack(t, tarOf(t, entry{name: "loop1/x.go", data: "x"}))
	if code != http.StatusConflict || m.Code != wire.CodeConflict || !strings.Contains(m.Message, "symlink loop") {
		t.Errorf("POST /unpack through a loop = %d %+v, want 409 naming the loop", code, m)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreateFormFile("file", "loop1/y.go")
	_, _ = part.Write([]byte("y"))
	_ = mw.Close()
	status, raw := ts.post(t, "/upload", mw.FormDataContentType(), body.Bytes())
	if status != http.StatusConflict || !strings.Contains(string(raw), "symlink loop") {
		t.Errorf("POST /upload through a loop = %d %s, want 409 naming the loop", status, raw)
	}
}
