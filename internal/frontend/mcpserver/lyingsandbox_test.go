package mcpserver

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// lyingBackend hands out goruntimetest sandboxes whose listings say every
// file is 10 bytes long, as a sandbox whose server was replaced by a
// command can, and that fetch ranges themselves (goruntime.RangeReader),
// as the local backend's do. It records the bytes each read asked for.
type lyingBackend struct {
	*goruntimetest.Backend
	wholeReads  atomic.Int64 // ReadFile calls
	largestWant atomic.Int64 // the largest n a ReadFileRange asked for
}

func (b *lyingBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	sb, err := b.Backend.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &lyingSandbox{Sandbox: sb.(*goruntimetest.Sandbox), b: b}, nil
}

type lyingSandbox struct {
	*goruntimetest.Sandbox
	b *lyingBackend
}

func (s *lyingSandbox) List(ctx context.Context, p string) ([]goruntime.FileInfo, error) {
	infos, err := s.Sandbox.List(ctx, p)
	for i := range infos {
		if !infos[i].IsDir {
			infos[i].Size = 10
		}
	}
	return infos, err
}

func (s *lyingSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	s.b.wholeReads.Add(1)
	return s.Sandbox.ReadFile(ctx, p)
}

func (s *lyingSandbox) ReadFileRange(ctx context.Context, p string, off int64, n int) ([]byte, error) {
	if int64(n) > s.b.largestWant.Load() {
		s.b.largestWant.Store(int64(n))
	}
	if err := goruntime.CheckPath(p); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.Dir(), p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(io.NewSectionReader(f, off, 1<<62), int64(n)))
}

// TestReadFileAsksOnlyForWhatItShows: read_file of a file whose listing
// says 10 bytes but which holds 8 MiB (a sandbox's server can lie) asks
// the sandbox for at most read_file's limit plus one byte, never for the
// whole file (before, it called ReadFile, which holds up to
// goruntime.MaxReadFileBytes: 634 MB of host memory for a file served as
// 256 MiB), and reports the file as larger than shown.
func TestReadFileAsksOnlyForWhatItShows(t *testing.T) {
	lb := &lyingBackend{Backend: goruntimetest.New(t.TempDir())}
	s, _ := newTestServer(t, Config{Backend: lb})
	cs := connectMemory(t, s, nil)
	out := runOut(t, call(t, cs, "run_go_code", map[string]any{"command": "head -c 8388608 /dev/zero | tr '\\0' y > big"}))
	if out.ExitCode != 0 {
		t.Fatalf("make big: %+v", out)
	}
	res := call(t, cs, "read_file", map[string]any{"path": "big"})
	if n := lb.wholeReads.Load(); n != 0 {
		t.Errorf("read_file read the whole file %d times; want ranges only", n)
	}
	if got := lb.largestWant.Load(); got == 0 || got > maxReadBytes+1 {
		t.Errorf("read_file asked for %d bytes at once; want 1 to %d", got, maxReadBytes+1)
	}
	ro := readOut(t, res)
	if ro.Length > maxReadBytes || !ro.Truncated || ro.Content != strings.Repeat("y", ro.Length) {
		t.Errorf("read_file of the lying file: length %d, truncated %v; want at most %d bytes of y, truncated", ro.Length, ro.Truncated, maxReadBytes)
	}
}
