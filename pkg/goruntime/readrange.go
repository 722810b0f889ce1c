package goruntime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
)

// MaxReadFileBytes bounds what one ReadFile returns, in bytes of file
// content: a larger file is refused with an error wrapping ErrTooLarge
// before it is read (read it in parts with ReadFileRange). It is the
// agent-sandbox SDK's default download limit too.
const MaxReadFileBytes = 256 << 20

// RangeReader is implemented by sandboxes that can fetch part of a file
// themselves (for example with an HTTP Range request, which the runtime
// server honours on /download). Session.ReadFileRange uses it when
// present.
type RangeReader interface {
	// ReadFileRange returns at most n bytes of the file at path from
	// byte off; fewer at the end of the file.
	ReadFileRange(ctx context.Context, path string, off int64, n int) ([]byte, error)
}

// ReadFileRange returns at most n bytes of the regular file at path
// (under /app) from byte offset off, holding no more than about n bytes in
// memory: fewer at the end of the file, none at or past it. A sandbox that
// implements RangeReader fetches the bytes itself; otherwise they are read
// inside the sandbox with tail and head and carried back as base64.
// Errors wrap ErrPathEscape for a bad path, ErrClosed, or name the range
// and what failed (a missing file fails the command inside the sandbox).
func (s *Session) ReadFileRange(ctx context.Context, path string, off int64, n int) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("read %s: offset %d and length %d must not be negative", path, off, n)
	}
	if n == 0 {
		return nil, nil
	}
	if rr, ok := s.sb.(RangeReader); ok {
		return rr.ReadFileRange(ctx, path, off, n)
	}
	// tail seeks to the offset of a regular file; head stops after n
	// bytes; base64 keeps every byte through the JSON of the runtime
	// contract, which replaces bytes that are not UTF-8.
	cmd := fmt.Sprintf("tail -c +%d -- %s | head -c %d | base64", off+1, shell.Quote(path), n)
	res, err := s.sb.Exec(ctx, ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("read bytes %d-%d of %s: %w", off, off+int64(n), path, err)
	}
	if res.ExitCode != 0 || res.StdoutTruncated {
		return nil, fmt.Errorf("read bytes %d-%d of %s: exit code %d: %s", off, off+int64(n), path, res.ExitCode, clip.String(strings.TrimSpace(res.Stderr), 500))
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(res.Stdout), ""))
	if err != nil {
		return nil, fmt.Errorf("read bytes %d-%d of %s: decode the sandbox's base64: %w", off, off+int64(n), path, err)
	}
	return data[:min(len(data), n)], nil
}

// ReadAt returns at most n bytes of the regular file at path (under /app)
// from byte offset off, and the file's size, holding no more than about n
// bytes in memory whatever the sandbox answers. It lists path's directory
// to learn the size and type, then reads in the cheapest way the sandbox
// offers: a file that fits whole is fetched with one range request from a
// sandbox that serves ranges (RangeReader; asked for n+1 bytes, the +1
// showing a file that grew since, or that a listing understated), else
// downloaded with ReadFile (which bounds the answer itself); a range of a
// larger file is read with ReadFileRange. The size returned is the
// listing's, or more when the read found more. Errors wrap ErrNotExist (no
// such file, or one listed that cannot be read, e.g. removed since or not
// a regular file), ErrIsDir, ErrPathEscape or ErrClosed, or name the
// offset past the end of the file or what failed.
func (s *Session) ReadAt(ctx context.Context, path string, off int64, n int) ([]byte, int64, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if err := CheckPath(path); err != nil {
		return nil, 0, err
	}
	if off < 0 || n < 0 {
		return nil, 0, fmt.Errorf("read %s: offset %d and length %d must not be negative", path, off, n)
	}
	info, err := s.stat(ctx, path)
	if err != nil {
		return nil, 0, err
	}
	size := info.Size
	if off > size {
		return nil, 0, fmt.Errorf("read %s: offset %d is past the end of the file (%d bytes)", path, off, size)
	}
	if off == 0 && size <= int64(n) {
		var data []byte
		if rr, ok := s.sb.(RangeReader); ok {
			data, err = rr.ReadFileRange(ctx, path, 0, n+1)
		} else {
			data, err = s.sb.ReadFile(ctx, path)
		}
		if err != nil {
			return nil, 0, err
		}
		return data[:min(len(data), n)], max(size, int64(len(data))), nil
	}
	want := int(min(int64(n), size-off))
	data, err := s.ReadFileRange(ctx, path, off, want)
	if err != nil {
		return nil, 0, err
	}
	return data[:min(len(data), want)], size, nil
}

// stat returns the listing's entry of the file at path, with errors
// wrapping ErrNotExist when there is none and ErrIsDir for a directory.
func (s *Session) stat(ctx context.Context, p string) (FileInfo, error) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	infos, err := s.sb.List(ctx, dir)
	switch {
	case errors.Is(err, ErrNotExist):
		return FileInfo{}, fmt.Errorf("read %s: no such file (%w)", p, ErrNotExist)
	case err != nil:
		return FileInfo{}, fmt.Errorf("read %s: list its directory: %w", p, err)
	}
	i := slices.IndexFunc(infos, func(fi FileInfo) bool { return fi.Name == base })
	switch {
	case i < 0:
		return FileInfo{}, fmt.Errorf("read %s: no such file (%w)", p, ErrNotExist)
	case infos[i].IsDir:
		return FileInfo{}, fmt.Errorf("read %s: %w", p, ErrIsDir)
	}
	return infos[i], nil
}
