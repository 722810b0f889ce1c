package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestReadFileRange: Session.ReadFileRange on a local sandbox goes through
// the sandbox's HTTP Range read (goruntime.RangeReader) and returns the
// same bytes the whole file holds at that range, including bytes that are
// not UTF-8; past the end it returns nothing; a missing file and a path
// out of /app give the sentinels callers test with errors.Is.
func TestReadFileRange(t *testing.T) {
	b := newBackend(t, testOptions())
	s := openSession(t, b)
	ctx := context.Background()
	if _, ok := s.Sandbox().(goruntime.RangeReader); !ok {
		t.Fatal("local sandbox does not implement goruntime.RangeReader")
	}
	// 256 bytes 0x00..0xff, then 1000 'z'.
	mustOK(t, s, goruntime.Request{Command: `awk 'BEGIN { for (i = 0; i < 256; i++) printf "%c", i }' > bin.dat && head -c 1000 /dev/zero | tr '\0' z >> bin.dat`})
	whole, err := s.ReadFile(ctx, "bin.dat")
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != 1256 {
		t.Fatalf("bin.dat has %d bytes, want 1256", len(whole))
	}
	for _, tc := range []struct {
		off  int64
		n    int
		want []byte
	}{
		{0, 4, whole[:4]},
		{126, 10, whole[126:136]}, // 0x7e..0x87: not UTF-8 past 0x7f
		{250, 20, whole[250:270]},
		{1250, 100, whole[1250:]}, // runs past the end: the rest
		{1256, 10, nil},           // at the end
		{5000, 10, nil},           // past it
	} {
		got, err := s.ReadFileRange(ctx, "bin.dat", tc.off, tc.n)
		if err != nil {
			t.Errorf("range %d+%d: %v", tc.off, tc.n, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("range %d+%d = %x, want %x", tc.off, tc.n, got, tc.want)
		}
	}
	if _, err := s.ReadFileRange(ctx, "missing.txt", 0, 10); !errors.Is(err, goruntime.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
	if _, err := s.ReadFileRange(ctx, "../etc/passwd", 0, 10); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("../etc/passwd: err = %v, want ErrPathEscape", err)
	}
	mustOK(t, s, goruntime.Request{Command: "ln -s /etc/passwd link"})
	if _, err := s.ReadFileRange(ctx, "link", 0, 10); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("symlink out of /app: err = %v, want ErrPathEscape", err)
	}
}

// TestReadFileTooLarge: a file over goruntime.MaxReadFileBytes (here a
// sparse one, which costs the sandbox no disk) is refused with
// ErrTooLarge before its bytes cross the socket, and its head can still
// be read in parts.
func TestReadFileTooLarge(t *testing.T) {
	b := newBackend(t, testOptions())
	s := openSession(t, b)
	ctx := context.Background()
	mustOK(t, s, goruntime.Request{Command: fmt.Sprintf("truncate -s %d sparse && printf head | dd of=sparse conv=notrunc 2>/dev/null", goruntime.MaxReadFileBytes+1)})
	_, err := s.ReadFile(ctx, "sparse")
	if !errors.Is(err, goruntime.ErrTooLarge) || !strings.Contains(err.Error(), "ReadFileRange") {
		t.Fatalf("ReadFile of a %d-byte file: err = %v, want ErrTooLarge naming ReadFileRange", goruntime.MaxReadFileBytes+1, err)
	}
	got, err := s.ReadFileRange(ctx, "sparse", 0, 4)
	if err != nil || string(got) != "head" {
		t.Errorf("its first 4 bytes: %q, %v; want \"head\"", got, err)
	}
}
