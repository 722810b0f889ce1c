package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
		return nil, ReadOutput{}, fmt.Errorf("max_bytes %d: must be between 1 and %s; read a larger file in parts with offset", limit, readLimit())
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

// readRange reads as goruntime.Session.ReadAt does, with its errors
// saying what to do in this server's tools.
func readRange(ctx context.Context, sess *goruntime.Session, p string, off int64, n int) ([]byte, int64, error) {
	data, size, err := sess.ReadAt(ctx, p, off, n)
	switch {
	case errors.Is(err, goruntime.ErrNotExist):
		return nil, 0, fmt.Errorf("%w; list_files shows what is there", err)
	case errors.Is(err, goruntime.ErrIsDir):
		return nil, 0, fmt.Errorf("%w; use list_files with path %q to see what it holds", err, p)
	}
	return data, size, err
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
