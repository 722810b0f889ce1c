package local

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// execLimit is the client-side deadline of a command: its own timeout
// (the server ends it then) plus execGrace.
func (s *Sandbox) execLimit(req goruntime.ExecRequest) time.Duration {
	t := req.Timeout
	if t <= 0 {
		t = s.b.opts.ExecTimeout
	}
	return t + execGrace
}

// Exec runs a command (see goruntime.Sandbox). It reads the cgroup's
// limit counters around the call to fill ExecResult.Limit, and after a
// command that ran into the memory or process limit it kills whatever the
// command left behind in the sandbox, so the next command starts clean.
func (s *Sandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if req.NeedsProcessAPI() || (req.Dir != "" && req.Dir != ".") {
		return nil, fmt.Errorf("execute in local sandbox %s: stdin, signals and a working directory need ExecStream (the process API), not Exec", s.meta.ID)
	}
	s.commandEvent(true)
	defer s.commandEvent(false)
	lw := s.watchLimits()
	defer lw.end()
	var resp *wire.ExecuteResponse
	err := s.do(ctx, "execute", s.execLimit(req), nil, func(ctx context.Context) error {
		var err error
		resp, err = s.cl.exec(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &goruntime.ExecResult{
		Stdout:          resp.Stdout,
		Stderr:          resp.Stderr,
		ExitCode:        resp.ExitCode,
		StdoutTruncated: resp.StdoutTruncated,
		StderrTruncated: resp.StderrTruncated,
		TimedOut:        resp.TimedOut,
		Duration:        time.Duration(resp.DurationMS * float64(time.Millisecond)),
	}
	s.finishExec(ctx, lw, res, resp.Signal)
	return res, nil
}

// WriteFile uploads r to /app/name; name must not contain "/". Errors
// wrap ErrPathEscape for a bad name, fs.ErrPermission when the sandbox's
// user may not write there, ErrTooLarge over the upload limit.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("write %q: want a plain file name: %w", name, goruntime.ErrPathEscape)
	}
	file := s.b.fileCallLimit()
	return s.do(ctx, "upload "+name, 0, file, func(ctx context.Context) error {
		return s.cl.upload(ctx, name, file.count(r))
	})
}

// Unpack writes the files of a tar archive under /app through the
// server's /unpack (goruntime.UnpackingSandbox). Errors wrap
// ErrPathEscape, fs.ErrPermission, ErrTooLarge, or errors.ErrUnsupported
// when the server predates /unpack (a sandbox reattached from an older
// version).
func (s *Sandbox) Unpack(ctx context.Context, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	file := s.b.fileCallLimit()
	return s.do(ctx, "unpack", 0, file, func(ctx context.Context) error {
		return s.cl.unpack(ctx, file.count(r))
	})
}

// ReadFile returns the content of a file under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the file is inside /app but the sandbox's user may not
// read it, e.g. a command made it mode 000).
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var data []byte
	file := s.b.fileCallLimit()
	err := s.do(ctx, "read "+path, 0, file, func(ctx context.Context) error {
		var err error
		data, err = s.cl.download(ctx, path, file)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// ReadFileRange returns at most n bytes of a file under /app from byte
// off (goruntime.RangeReader), fetched with an HTTP Range request so only
// those bytes cross the socket; none at or past the end. Errors wrap
// ErrNotExist, ErrPathEscape or fs.ErrPermission as ReadFile's do.
func (s *Sandbox) ReadFileRange(ctx context.Context, path string, off int64, n int) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var data []byte
	file := s.b.fileCallLimit()
	err := s.do(ctx, "read "+path, 0, file, func(ctx context.Context) error {
		var err error
		data, err = s.cl.downloadRange(ctx, path, off, n, file)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// List returns the entries of a directory under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the directory is inside /app but the sandbox's user
// may not read it).
func (s *Sandbox) List(ctx context.Context, path string) ([]goruntime.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []goruntime.FileInfo
	file := s.b.fileCallLimit()
	err := s.do(ctx, "list "+path, 0, file, func(ctx context.Context) error {
		var err error
		out, err = s.cl.list(ctx, path, file)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
