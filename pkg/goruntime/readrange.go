package goruntime

import (
	"context"
	"encoding/base64"
	"fmt"
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
