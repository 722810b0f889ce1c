package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	p, err := cleanPath(in.Path, false)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	limit := in.MaxBytes
	switch {
	case limit == 0:
		limit = maxReadBytes
	case limit < 0 || limit > maxReadBytes:
		return nil, ReadOutput{}, fmt.Errorf("max_bytes %d: must be between 1 and %d (256 KiB); read a larger file in parts with offset", limit, maxReadBytes)
	}
	if in.Offset < 0 {
		return nil, ReadOutput{}, fmt.Errorf("offset %d: must be 0 or more", in.Offset)
	}
	var (
		data []byte
		size int64
	)
	u, err := s.call(ctx, req, in.SandboxID, needSandbox, nil, func(sess *goruntime.Session, _ time.Duration) error {
		var err error
		data, size, err = readRange(ctx, sess, p, in.Offset, limit)
		return err
	})
	if err != nil {
		return nil, ReadOutput{}, sessions.Describe(err)
	}
	out := ReadOutput{Path: p, Size: size, Offset: in.Offset, SandboxID: u.ID}
	// A range may start or end inside a UTF-8 sequence: drop the pieces.
	for i := 0; i < utf8.UTFMax-1 && in.Offset > 0 && len(data) > 0 && !utf8.RuneStart(data[0]); i++ {
		data = data[1:]
		out.Offset++
	}
	if out.Offset+int64(len(data)) < size {
		data = trimPartialRune(data)
	}
	end := out.Offset + int64(len(data))
	out.Truncated = end < size
	var text string
	switch {
	case bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data):
		out.Binary = true
		text = fmt.Sprintf("%s is a binary file (%d bytes; bytes %d-%d hold NUL bytes or are not UTF-8 text); its content is not shown. Inspect it with run_go_code, e.g. command \"od -A d -c %s | head -50\"",
			p, size, out.Offset, end, shell.Quote(p))
	default:
		out.Content = string(data)
		out.Length = len(data)
		text = out.Content
		if out.Offset > 0 || out.Truncated {
			text += fmt.Sprintf("\n[... %s is %d bytes; this is bytes %d-%d", p, size, out.Offset, end)
			if out.Truncated {
				text += fmt.Sprintf("; read on with offset %d", end)
			}
			text += " ...]"
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// readRange returns at most n bytes of file p from offset off, and the
// file's size, without holding more than about n bytes in memory: it lists
// p's directory to learn the size and type, downloads a file that fits
// whole (readSmall), and reads a range of a larger one with
// Session.ReadFileRange. Errors name p and say what to do.
func readRange(ctx context.Context, sess *goruntime.Session, p string, off int64, n int) ([]byte, int64, error) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	infos, err := sess.List(ctx, dir)
	switch {
	case errors.Is(err, goruntime.ErrNotExist):
		return nil, 0, fmt.Errorf("read %s: no such file under /app (list_files shows what is there)", p)
	case err != nil:
		// The library's error names the listing of p's directory.
		return nil, 0, fmt.Errorf("read %s: %w", p, err)
	}
	i := slices.IndexFunc(infos, func(fi goruntime.FileInfo) bool { return fi.Name == base })
	switch {
	case i < 0:
		return nil, 0, fmt.Errorf("read %s: no such file under /app (list_files shows what is there)", p)
	case infos[i].IsDir:
		return nil, 0, fmt.Errorf("read %s: it is a directory; use list_files with path %q to see what it holds", p, p)
	}
	size := infos[i].Size
	if off > size {
		return nil, 0, fmt.Errorf("read %s: offset %d is past the end of the file (%d bytes)", p, off, size)
	}
	if off == 0 && size <= int64(n) {
		data, err := readSmall(ctx, sess, p, n)
		switch {
		case errors.Is(err, goruntime.ErrNotExist):
			// Listed but not readable: removed since, or not a regular
			// file (a named pipe, a dangling symlink); the error says which.
			return nil, 0, fmt.Errorf("%w; list_files shows what is there", err)
		case err != nil:
			return nil, 0, err
		}
		size = max(size, int64(len(data))) // it may have grown since the listing
		return data[:min(len(data), n)], size, nil
	}
	want := min(int64(n), size-off)
	if want == 0 {
		return nil, size, nil
	}
	data, err := sess.ReadFileRange(ctx, p, off, int(want))
	if err != nil {
		return nil, 0, err
	}
	return data[:min(len(data), int(want))], size, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (left
// by cutting a longer text).
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// readSmall reads file p that its listing says is at most n bytes. The
// listing comes from the sandbox, which may lie (a command can replace
// its server), so a sandbox that fetches ranges itself is asked for n+1
// bytes (the +1 shows the file grew), never the whole file: ReadFile
// would hold up to goruntime.MaxReadFileBytes. Another backend's
// ReadFileRange runs a command, so its ReadFile is used (it bounds the
// answer itself).
func readSmall(ctx context.Context, sess *goruntime.Session, p string, n int) ([]byte, error) {
	if _, ok := sess.Sandbox().(goruntime.RangeReader); ok {
		return sess.ReadFileRange(ctx, p, 0, n+1)
	}
	return sess.ReadFile(ctx, p)
}
