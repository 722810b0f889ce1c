package goruntime_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// TestReadAt: ReadAt reads a whole small file, a range of a larger one,
// nothing at the end, and refuses an offset past the end, a missing file
// (ErrNotExist) and a directory (ErrIsDir), on a sandbox that cannot
// fetch ranges itself (goruntimetest's).
func TestReadAt(t *testing.T) {
	ctx := context.Background()
	sess := openFake(t)
	if _, err := sess.Execute(ctx, goruntime.Request{Files: []goruntime.File{
		{Path: "d/digits.txt", Data: []byte("0123456789")},
	}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		off      int64
		n        int
		want     string
		wantSize int64
	}{
		{0, 100, "0123456789", 10},
		{0, 4, "0123", 10},
		{5, 3, "567", 10},
		{8, 100, "89", 10},
		{10, 5, "", 10},
	}
	for _, c := range cases {
		data, size, err := sess.ReadAt(ctx, "d/digits.txt", c.off, c.n)
		if err != nil || string(data) != c.want || size != c.wantSize {
			t.Errorf("ReadAt(off %d, n %d) = %q, size %d, %v; want %q, size %d", c.off, c.n, data, size, err, c.want, c.wantSize)
		}
	}
	for _, c := range []struct {
		path string
		off  int64
		is   error
		says string
	}{
		{"d/missing.txt", 0, goruntime.ErrNotExist, "no such file"},
		{"nodir/x.txt", 0, goruntime.ErrNotExist, "no such file"},
		{"d", 0, goruntime.ErrIsDir, "d: is a directory"},
		{"d/digits.txt", 11, nil, "past the end"},
		{"../x", 0, goruntime.ErrPathEscape, ".."},
	} {
		_, _, err := sess.ReadAt(ctx, c.path, c.off, 10)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ReadAt(%q, off %d): %v; want an error wrapping %v saying %q", c.path, c.off, err, c.is, c.says)
		}
	}
}

// rangeBackend hands out goruntimetest sandboxes that fetch ranges
// themselves (goruntime.RangeReader), as the local backend's do, and
// whose listings say every file is 10 bytes long, as a sandbox whose
// server a command replaced can. They record what each read asked for.
type rangeBackend struct{ *goruntimetest.Backend }

func (b rangeBackend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	sb, err := b.Backend.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &rangeSandbox{Sandbox: sb.(*goruntimetest.Sandbox)}, nil
}

type rangeSandbox struct {
	*goruntimetest.Sandbox
	wholeReads int // ReadFile calls
	asked      []int
}

func (s *rangeSandbox) List(ctx context.Context, p string) ([]goruntime.FileInfo, error) {
	infos, err := s.Sandbox.List(ctx, p)
	for i := range infos {
		if !infos[i].IsDir {
			infos[i].Size = 10
		}
	}
	return infos, err
}

func (s *rangeSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	s.wholeReads++
	return s.Sandbox.ReadFile(ctx, p)
}

func (s *rangeSandbox) ReadFileRange(_ context.Context, p string, off int64, n int) ([]byte, error) {
	s.asked = append(s.asked, n)
	f, err := os.Open(filepath.Join(s.Dir(), p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.NewSectionReader(f, off, int64(n)))
}

// TestReadAtAsksOnlyForWhatItReturns: on a sandbox that fetches ranges,
// ReadAt of a file its listing says fits asks for n+1 bytes (the +1 shows
// the file is larger than listed), never the whole file, returns n, and
// reports the larger size.
func TestReadAtAsksOnlyForWhatItReturns(t *testing.T) {
	ctx := context.Background()
	sess, err := goruntime.Open(ctx, rangeBackend{goruntimetest.New(t.TempDir())}, goruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	big := bytes.Repeat([]byte("y"), 1<<20)
	if _, err := sess.Execute(ctx, goruntime.Request{Files: []goruntime.File{{Path: "big", Data: big}}}); err != nil {
		t.Fatal(err)
	}
	data, size, err := sess.ReadAt(ctx, "big", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	rs := sess.Sandbox().(*rangeSandbox)
	if len(data) != 100 || size <= 100 || rs.wholeReads != 0 || len(rs.asked) != 1 || rs.asked[0] != 101 {
		t.Errorf("ReadAt of a 1 MiB file listed as 10 bytes: %d bytes, size %d, %d whole reads, ranges asked %v; want 100 bytes, size over 100, no whole read, one range of 101",
			len(data), size, rs.wholeReads, rs.asked)
	}
}
