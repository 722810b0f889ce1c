package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
)

// The read_file, list_files and reset_sandbox tools, and --ephemeral.

func TestReadAndListFiles(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"go.mod": "module m\n", "pkg/util/util.go": "package util\n"},
		"command": "head -c 300000 /dev/zero | tr '\\0' x > big.txt; printf '\\377\\376' > bin.dat",
	})
	res := call(t, cs, "read_file", map[string]any{"path": "/app/pkg/util/util.go"})
	if res.IsError || text(res) != "package util\n" {
		t.Fatalf("read_file: %v %q", res.IsError, text(res))
	}
	res = call(t, cs, "read_file", map[string]any{"path": "big.txt"})
	if res.IsError || !strings.Contains(text(res), "read on with offset 262144") || len(text(res)) > maxReadBytes+200 {
		t.Fatalf("big read_file: isError=%v len=%d", res.IsError, len(text(res)))
	}
	res = call(t, cs, "read_file", map[string]any{"path": "bin.dat"})
	if res.IsError || !strings.Contains(text(res), "binary") {
		t.Fatalf("binary read_file: %q", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{})
	if res.IsError || !strings.Contains(text(res), "go.mod  9 bytes") || !strings.Contains(text(res), "pkg/") || strings.Contains(text(res), "util.go") {
		t.Fatalf("list_files:\n%s", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{"recursive": true})
	if res.IsError || !strings.Contains(text(res), "pkg/util/util.go  13 bytes") {
		t.Fatalf("recursive list_files:\n%s", text(res))
	}
}

// readOut decodes read_file's structured result.
func readOut(t *testing.T, res *mcp.CallToolResult) ReadOutput {
	t.Helper()
	if res.IsError || res.StructuredContent == nil {
		t.Fatalf("read_file failed: %s", text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out ReadOutput
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return out
}

// TestReadFileIsBounded: a file far larger than read_file's limit is never
// loaded whole into the server (before, a 1 GB sparse file cost ~2 GB of
// RSS), and its NUL bytes make it binary, not text.
func TestReadFileIsBounded(t *testing.T) {
	s, b := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "truncate -s 64M sparse && head -c 1000000 /dev/zero | tr '\\0' y > text"}))
	res := call(t, cs, "read_file", map[string]any{"path": "sparse"})
	if got := b.Sandbox(out.SandboxID).LargestRead(); got > maxReadBytes {
		t.Errorf("read_file of a 64 MiB file downloaded %d bytes whole; want at most %d", got, maxReadBytes)
	}
	ro := readOut(t, res)
	if !ro.Binary || ro.Content != "" || ro.Size != 64<<20 || !strings.Contains(text(res), "binary") {
		t.Errorf("sparse file: binary=%v size=%d content %d bytes, text %q; want binary, size %d, no content", ro.Binary, ro.Size, len(ro.Content), clip.String(text(res), 200), 64<<20)
	}
	// A large text file reads whole in parts.
	var got strings.Builder
	for off := int64(0); ; {
		ro := readOut(t, call(t, cs, "read_file", map[string]any{"path": "text", "offset": off}))
		if ro.Offset != off || ro.Size != 1000000 || ro.Length != len(ro.Content) || ro.Length > maxReadBytes {
			t.Fatalf("part at %d: offset %d size %d length %d (content %d bytes)", off, ro.Offset, ro.Size, ro.Length, len(ro.Content))
		}
		got.WriteString(ro.Content)
		off += int64(ro.Length)
		if !ro.Truncated {
			break
		}
	}
	if got.String() != strings.Repeat("y", 1000000) {
		t.Errorf("parts joined = %d bytes, want the file's 1000000 'y'", got.Len())
	}
	if got := b.Sandbox(out.SandboxID).LargestRead(); got > maxReadBytes {
		t.Errorf("reading in parts downloaded %d bytes whole; want at most %d", got, maxReadBytes)
	}
}

func TestReadFileRanges(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"digits.txt": "0123456789", "it's here/a b.txt": "quoted", "nul.txt": "ab\x00cd"},
		"command": "mkdir -p sub && printf 'h\\303\\251llo' > utf8.txt", // hé llo: é is 2 bytes
	})
	ro := readOut(t, call(t, cs, "read_file", map[string]any{"path": "digits.txt", "offset": 5, "max_bytes": 3}))
	if ro.Content != "567" || ro.Offset != 5 || ro.Length != 3 || ro.Size != 10 || !ro.Truncated {
		t.Errorf("digits 5+3 = %+v, want 567 at 5, length 3, size 10, truncated", ro)
	}
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "digits.txt", "offset": 8}))
	if ro.Content != "89" || ro.Truncated {
		t.Errorf("digits from 8 = %+v, want 89, not truncated", ro)
	}
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "it's here/a b.txt", "offset": 1}))
	if ro.Content != "uoted" {
		t.Errorf("quoted name from 1 = %+v, want uoted", ro)
	}
	// A range starting inside a UTF-8 sequence skips its rest.
	ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "utf8.txt", "offset": 2}))
	if ro.Content != "llo" || ro.Offset != 3 {
		t.Errorf("utf8 from 2 = %+v, want llo at 3", ro)
	}
	// NUL bytes are binary even though they are valid UTF-8.
	if ro = readOut(t, call(t, cs, "read_file", map[string]any{"path": "nul.txt"})); !ro.Binary || ro.Content != "" {
		t.Errorf("nul.txt = %+v, want binary", ro)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "digits.txt", "offset": 11}, "past the end"},
		{map[string]any{"path": "digits.txt", "offset": -1}, "offset -1"},
		{map[string]any{"path": "digits.txt", "max_bytes": maxReadBytes + 1}, "max_bytes"},
		{map[string]any{"path": "sub"}, "is a directory; use list_files"},
		{map[string]any{"path": "nope/x"}, "no such file"},
	} {
		res := call(t, cs, "read_file", c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("read_file %v: isError=%v %q, want an error containing %q", c.args, res.IsError, text(res), c.want)
		}
	}
}

func TestResetKeepsSessionEmptiesApp(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "reset_sandbox", nil)
	if res.IsError || !strings.Contains(text(res), "nothing to reset") || hb.Opened() != 0 {
		t.Fatalf("reset before any sandbox: %q (opened %d)", text(res), hb.Opened())
	}
	call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"a/b.txt": "x"}, "command": "true"})
	res = call(t, cs, "reset_sandbox", nil)
	if res.IsError {
		t.Fatalf("reset: %s", text(res))
	}
	res = call(t, cs, "list_files", map[string]any{})
	if !strings.Contains(text(res), "is empty") {
		t.Fatalf("after reset: %s", text(res))
	}
}

func TestEphemeralWipesBetweenCalls(t *testing.T) {
	s, _ := newTestServer(t, Config{Ephemeral: true})
	cs := connectMemory(t, s, nil)
	call(t, cs, "run_go_code", map[string]any{"files": map[string]any{"a.txt": "x"}, "command": "cat a.txt"})
	res := call(t, cs, "run_go_code", map[string]any{"command": "ls"})
	if out := runOut(t, res); out.Stdout != "" {
		t.Fatalf("--ephemeral: second call sees %q", out.Stdout)
	}
}
