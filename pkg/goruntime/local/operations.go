package local

import (
	"context"
	"fmt"
	"io"
	"time"

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
//
// Bad input (goruntime.ExecRequest.Validate) is refused before anything
// is sent, and so is a request that needs the process API (ExecStream).
func (s *Sandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("execute in local sandbox %s: %w", s.meta.ID, err)
	}
	return s.execContract(ctx, req)
}

// execContract runs a validated req with the runtime contract's /execute.
func (s *Sandbox) execContract(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if req.NeedsProcessAPI() {
		return nil, fmt.Errorf("execute in local sandbox %s: stdin, signals and a working directory need ExecStream (the process API), not Exec", s.meta.ID)
	}
	s.commandEvent(true)
	defer s.commandEvent(false)
	lw := s.watchLimits()
	defer lw.end()
	var res *goruntime.ExecResult
	err := s.do(ctx, "execute", s.execLimit(req), nil, func(ctx context.Context) error {
		var err error
		res, err = s.cl.Exec(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.finishExec(ctx, lw, res)
	return res, nil
}

// WriteFile uploads r to /app/name, a plain name (goruntime.CheckName).
// Errors wrap ErrPathEscape for a bad name, fs.ErrPermission when the sandbox's
// user may not write there, ErrTooLarge over the upload limit.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := goruntime.CheckName(name); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	file := s.b.fileCallLimit()
	return s.do(ctx, "upload "+name, 0, file, func(ctx context.Context) error {
		return s.cl.Upload(ctx, name, r, file.count)
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
		return s.cl.Unpack(ctx, r, file.count)
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
		data, err = s.cl.Download(ctx, path, file.count)
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
		data, err = s.cl.DownloadRange(ctx, path, off, n, file.count)
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
		out, err = s.cl.List(ctx, path, file.count)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
