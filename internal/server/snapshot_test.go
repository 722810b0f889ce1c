package server

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// snapDirs are one sandbox's snapshot areas, as the commands' environment
// names them (GOPATH, GOMODCACHE, GOCACHE), each under a temp directory.
type snapDirs struct{ gopath, modcache, gocache string }

// startSnapServer starts a server whose GOPATH and caches are dirs of
// its own, the build cache holding a "seed" written before the server
// started (what a pod's init container copies in).
func startSnapServer(t *testing.T, seed map[string]string) (*testServer, snapDirs) {
	t.Helper()
	root := t.TempDir()
	d := snapDirs{gopath: filepath.Join(root, "gopath"), modcache: filepath.Join(root, "mod"), gocache: filepath.Join(root, "go-build")}
	for name, data := range seed {
		mkFile(t, filepath.Join(d.gocache, name), data, 0o644)
	}
	if len(seed) > 0 {
		// The kernel stamps files with a clock that ticks every few ms:
		// the seed must be a tick older than the server's start.
		time.Sleep(50 * time.Millisecond)
	}
	env := append(os.Environ(), "GOPATH="+d.gopath, "GOMODCACHE="+d.modcache, "GOCACHE="+d.gocache)
	ts := startServer(t, func(c *Config) { c.Environ = env })
	return ts, d
}

func mkFile(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// snapshot takes a snapshot: its tar and trailer status, or the error
// answer's status and body.
func (ts *testServer) snapshot(t *testing.T) (tarball []byte, status string, code int) {
	t.Helper()
	resp, err := http.Get(ts.URL + wire.SnapshotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the snapshot: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, "", resp.StatusCode
	}
	st := resp.Trailer.Get(wire.SnapshotStatusTrailer)
	if st != wire.SnapshotStatusOK {
		st += ": " + resp.Trailer.Get(wire.SnapshotErrorTrailer)
	}
	return body, st, resp.StatusCode
}

func (ts *testServer) putSnapshot(t *testing.T, mode string, tarball []byte) (int, wire.Message) {
	t.Helper()
	code, body := ts.post(t, wire.SnapshotPath+"?mode="+mode, "application/x-tar", tarball)
	var m wire.Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("POST /snapshot = %d %s: not a wire.Message", code, body)
	}
	return code, m
}

// tarNames lists a tar's entries as "name type [mode] [size or link]".
func tarNames(t *testing.T, tarball []byte) []string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(tarball))
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out = append(out, fmt.Sprintf("%s dir %o", h.Name, h.Mode))
		case tar.TypeSymlink:
			out = append(out, fmt.Sprintf("%s -> %s", h.Name, h.Linkname))
		default:
			out = append(out, fmt.Sprintf("%s %o %d", h.Name, h.Mode, h.Size))
		}
	}
	sort.Strings(out)
	return out
}

// tree describes the files under dir as "path type mode [content or link]".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out = append(out, fmt.Sprintf("%s/ %o", rel, fi.Mode().Perm()))
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out = append(out, fmt.Sprintf("%s -> %s", rel, l))
		default:
			data, _ := os.ReadFile(p)
			out = append(out, fmt.Sprintf("%s %o %q", rel, fi.Mode().Perm(), data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A snapshot holds the base directory and GOPATH whole, and of the caches
// what changed since the server started (not the seed); written into
// another sandbox it gives the same files, modes and links.
func TestSnapshotRoundTrip(t *testing.T) {
	a, ad := startSnapServer(t, map[string]string{"aa/seed-d": "seed"})
	mkFile(t, filepath.Join(a.Base, "go.mod"), "module m\n", 0o644)
	mkFile(t, filepath.Join(a.Base, "cmd/tool/main.go"), "package main\n", 0o644)
	mkFile(t, filepath.Join(a.Base, "run.sh"), "#!/bin/sh\n", 0o755)
	mkFile(t, filepath.Join(a.Base, "empty"), "", 0o600)
	if err := os.Symlink("/etc/passwd", filepath.Join(a.Base, "outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("go.mod", filepath.Join(a.Base, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(a.Base, "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(a.Base, "ro/kept"), "kept", 0o444)
	if err := os.Chmod(filepath.Join(a.Base, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(a.Base, "ro"), 0o755) })
	if err := syscall.Mkfifo(filepath.Join(a.Base, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(ad.gocache, "bb/new-d"), "built", 0o644)
	mkFile(t, filepath.Join(ad.modcache, "example.com/m@v1.0.0/m.go"), "package m\n", 0o444)
	mkFile(t, filepath.Join(ad.gopath, "bin/tool"), "elf", 0o755)

	tarball, status, code := a.snapshot(t)
	if code != http.StatusOK || status != wire.SnapshotStatusOK {
		t.Fatalf("snapshot: %d %s %s", code, status, tarball)
	}
	names := tarNames(t, tarball)
	want := []string{
		"app/cmd/ dir 755", "app/cmd/tool/ dir 755", "app/cmd/tool/main.go 644 13", "app/empty 600 0", "app/go.mod 644 9",
		"app/inside -> go.mod", "app/outside -> /etc/passwd", "app/ro/ dir 555", "app/ro/kept 444 4", "app/run.sh 755 10",
		"gocache/bb/ dir 755", "gocache/bb/new-d 644 5",
		"gomodcache/example.com/ dir 755", "gomodcache/example.com/m@v1.0.0/ dir 755", "gomodcache/example.com/m@v1.0.0/m.go 444 10",
		"gopath/bin/ dir 755", "gopath/bin/tool 755 3",
	}
	if !slices.Equal(names, want) {
		t.Errorf("snapshot entries:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}

	b, bd := startSnapServer(t, map[string]string{"aa/seed-d": "seed"})
	if code, m := b.putSnapshot(t, wire.SnapshotModeAdd, tarball); code != http.StatusOK {
		t.Fatalf("put the snapshot into another sandbox: %d %+v", code, m)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(b.Base, "ro"), 0o755) })
	_ = os.Remove(filepath.Join(a.Base, "fifo"))
	for _, pair := range [][2]string{{a.Base, b.Base}, {ad.gocache, bd.gocache}, {ad.modcache, bd.modcache}, {ad.gopath, bd.gopath}} {
		if got, want := tree(t, pair[1]), tree(t, pair[0]); !slices.Equal(got, want) {
			t.Errorf("%s after the put:\n%s\nwant (%s):\n%s", pair[1], strings.Join(got, "\n"), pair[0], strings.Join(want, "\n"))
		}
	}
}

// A restore rolls the base directory and GOPATH back exactly (files
// added since are gone, deleted and changed ones back); the caches keep
// what they gained and get the snapshot's.
func TestSnapshotRestoreInPlace(t *testing.T) {
	s, d := startSnapServer(t, map[string]string{"aa/seed-d": "seed"})
	mkFile(t, filepath.Join(s.Base, "main.go"), "v1", 0o644)
	mkFile(t, filepath.Join(s.Base, "pkg/a.go"), "a", 0o644)
	mkFile(t, filepath.Join(d.gocache, "bb/one-d"), "one", 0o644)
	mkFile(t, filepath.Join(d.gopath, "bin/tool"), "v1", 0o755)
	tarball, status, _ := s.snapshot(t)
	if status != wire.SnapshotStatusOK {
		t.Fatalf("snapshot: %s", status)
	}
	before := tree(t, s.Base)

	mkFile(t, filepath.Join(s.Base, "main.go"), "v2", 0o600)
	mkFile(t, filepath.Join(s.Base, "added/deep/x.go"), "x", 0o644)
	if err := os.Remove(filepath.Join(s.Base, "pkg/a.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(s.Base, "added/deep"), 0o000); err != nil { // a command's chmod
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(d.gocache, "cc/two-d"), "two", 0o644)
	if err := os.Remove(filepath.Join(d.gocache, "bb/one-d")); err != nil {
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(d.gopath, "bin/other"), "x", 0o755)

	if code, m := s.putSnapshot(t, wire.SnapshotModeRestore, tarball); code != http.StatusOK {
		t.Fatalf("restore: %d %+v", code, m)
	}
	if got := tree(t, s.Base); !slices.Equal(got, before) {
		t.Errorf("base directory after the restore:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if got := tree(t, d.gopath); !slices.Equal(got, []string{"bin/ 755", `bin/tool 755 "v1"`}) {
		t.Errorf("GOPATH after the restore: %q", got)
	}
	for _, f := range []string{"aa/seed-d", "bb/one-d", "cc/two-d"} {
		if _, err := os.Stat(filepath.Join(d.gocache, f)); err != nil {
			t.Errorf("cache entry %s after the restore: %v", f, err)
		}
	}
}

// Nothing is taken or written while something runs: a command in flight
// (or, with a reaper, a process one left) gets a 409 busy before any
// byte; a count that moved between the start and the end is reported
// (stillQuiet).
func TestSnapshotRefusedWhileBusy(t *testing.T) {
	s, _ := startSnapServer(t, nil)
	s.snapDrain = 100 * time.Millisecond
	mkFile(t, filepath.Join(s.Base, "f"), "x", 0o644)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(t, "sleep 2")
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, inFlight := s.chg.state(); inFlight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	body, _, code := s.snapshot(t)
	var m wire.Message
	_ = json.Unmarshal(body, &m)
	if code != http.StatusConflict || m.Code != wire.CodeBusy || !strings.Contains(m.Message, "in flight") {
		t.Errorf("snapshot during a command: %d %s", code, body)
	}
	if code, m := s.putSnapshot(t, wire.SnapshotModeRestore, tarOf(t)); code != http.StatusConflict || m.Code != wire.CodeBusy {
		t.Errorf("restore during a command: %d %+v", code, m)
	}
	<-done
	if _, status, code := s.snapshot(t); code != http.StatusOK || status != wire.SnapshotStatusOK {
		t.Errorf("snapshot once the command ended: %d %s", code, status)
	}

	before, err := s.quiet()
	if err != nil {
		t.Fatal(err)
	}
	s.chg.begin()()
	if err := s.stillQuiet(before); !errors.Is(err, errBusy) || !strings.Contains(err.Error(), "meanwhile") {
		t.Errorf("stillQuiet after a change: %v", err)
	}
}

// A tar with names outside the areas, a "..", or entries a snapshot does
// not hold is refused; a symlink it planted is not followed by a later
// entry.
func TestSnapshotPutRefusesBadEntries(t *testing.T) {
	outside := t.TempDir()
	s, _ := startSnapServer(t, nil)
	for _, tc := range []struct {
		name    string
		entries []entry
		code    int
		errCode wire.ErrorCode
	}{
		{"dot-dot", []entry{{name: "app/../escape", data: "x"}}, http.StatusForbidden, wire.CodePathEscape},
		{"absolute", []entry{{name: "/app/x", data: "x"}}, http.StatusForbidden, wire.CodePathEscape},
		{"unknown area", []entry{{name: "etc/passwd", data: "x"}}, http.StatusBadRequest, wire.CodeBadRequest},
		{"area alone", []entry{{name: "app", data: "x"}}, http.StatusBadRequest, wire.CodeBadRequest},
		{"hard link", []entry{{name: "app/l", typ: tar.TypeLink, link: "app/x"}}, http.StatusBadRequest, wire.CodeBadRequest},
		{"through a planted symlink", []entry{{name: "app/out", typ: tar.TypeSymlink, link: outside}, {name: "app/out/owned", data: "x"}},
			http.StatusForbidden, wire.CodePathEscape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := s.putSnapshot(t, wire.SnapshotModeAdd, tarOf(t, tc.entries...))
			if code != tc.code || m.Code != tc.errCode {
				t.Errorf("= %d %+v, want %d %s", code, m, tc.code, tc.errCode)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the sandbox: %v", entries)
	}
	if code, m := s.putSnapshot(t, "merge", tarOf(t)); code != http.StatusBadRequest {
		t.Errorf("unknown mode: %d %+v", code, m)
	}
	req, _ := http.NewRequest(http.MethodHead, s.URL+wire.SnapshotPath, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /snapshot: %v %v", resp, err)
	}
}

// As the reaper (a pod's PID 1), the server counts what a command left
// running: a snapshot is refused until it ends.
func TestBinarySnapshotRefusedWithALeftProcess(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep")
	}
	p := startBinary(t, os.Environ()) // it reaps by default
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": fmt.Sprintf("(sleep %s >/dev/null 2>&1 &)", tok)}); res.ExitCode != 0 {
		t.Fatalf("start a process left behind: %+v", res)
	}
	resp, err := http.Get(p.url + wire.SnapshotPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "left running") {
		t.Errorf("snapshot with a process left running: %d %s", resp.StatusCode, body)
	}
	killArg(tok)
	waitGone(t, tok)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(p.url + wire.SnapshotPath)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && resp.Trailer.Get(wire.SnapshotStatusTrailer) == wire.SnapshotStatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot after the process ended: %d %v\n%s", resp.StatusCode, resp.Trailer, p.logs())
		}
		time.Sleep(100 * time.Millisecond) // the reaper collects it within reapDelay
	}
}
