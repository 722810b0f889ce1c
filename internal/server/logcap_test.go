package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCapLogKeepsFileBounded: a log file written past its cap never holds
// much more than the cap, each line stays whole, and the latest line is
// kept, after a line saying that earlier ones were dropped.
func TestCapLogKeepsFileBounded(t *testing.T) {
	for _, appendMode := range []bool{true, false} {
		t.Run(fmt.Sprintf("append=%v", appendMode), func(t *testing.T) {
			flags := os.O_CREATE | os.O_WRONLY
			if appendMode {
				flags |= os.O_APPEND
			}
			path := filepath.Join(t.TempDir(), "server.log")
			f, err := os.OpenFile(path, flags, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			const limit = 16 << 10
			w := capLog(f, limit)
			largest := int64(0)
			for i := range 5000 {
				if _, err := fmt.Fprintf(w, `{"msg":"request","n":%d,"path":"%s"}`+"\n", i, strings.Repeat("A", 100)); err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				largest = max(largest, fi.Size())
			}
			if largest > limit {
				t.Errorf("the log grew to %d bytes; cap %d", largest, limit)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if !strings.Contains(lines[0], "log emptied") || !strings.Contains(lines[len(lines)-1], `"n":4999`) {
				t.Errorf("first line %q, last line %q; want the emptied note first and line 4999 last", lines[0], lines[len(lines)-1])
			}
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Fatalf("a line is not whole JSON: %q", l)
				}
			}
			if bytes.Contains(data, []byte{0}) {
				t.Error("the log has a hole (NUL bytes): its offset was not reset after emptying")
			}
		})
	}
}

// TestCapLogLeavesOtherWritersAlone: a pipe or a non-file writer, or no
// cap, is returned as it is (kubelet rotates a pod's logs itself).
func TestCapLogLeavesOtherWritersAlone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := capLog(w, 1<<20); got != w {
		t.Errorf("capLog(pipe) = %T, want the pipe itself", got)
	}
	var buf bytes.Buffer
	if got := capLog(&buf, 1<<20); got != &buf {
		t.Errorf("capLog(buffer) = %T, want the buffer itself", got)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := capLog(f, 0); got != f {
		t.Errorf("capLog(file, 0) = %T, want the file itself", got)
	}
}
