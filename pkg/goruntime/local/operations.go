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
	return s.contractCommand(ctx, "execute", req, func(ctx context.Context) (*goruntime.ExecResult, error) {
		return s.cl.Exec(ctx, req)
	})
}

// UnpackExec writes the files of archive under /app and runs a command
// in one request to the runtime server (goruntime.UnpackExecSandbox),
// with Exec's limits and checks. A server that predates the request (a
// sandbox reattached from an older version) answers errors.ErrUnsupported.
func (s *Sandbox) UnpackExec(ctx context.Context, archive []byte, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("unpack and execute in local sandbox %s: %w", s.meta.ID, err)
	}
	return s.contractCommand(ctx, "unpack and execute", req, func(ctx context.Context) (*goruntime.ExecResult, error) {
		return s.cl.UnpackExec(ctx, archive, req)
	})
}

// contractCommand runs a validated req with call, a request of the
// runtime contract that runs it: with the limit counters read around it
// and the clean-up after a command that ran into a limit (finishExec).
func (s *Sandbox) contractCommand(ctx context.Context, what string, req goruntime.ExecRequest, call func(context.Context) (*goruntime.ExecResult, error)) (*goruntime.ExecResult, error) {
	if req.NeedsProcessAPI() {
		return nil, fmt.Errorf("%s in local sandbox %s: stdin, signals and a working directory need ExecStream (the process API), not Exec", what, s.meta.ID)
	}
	s.commandEvent(true)
	defer s.commandEvent(false)
	lw := s.watchLimits()
	defer lw.end()
	var res *goruntime.ExecResult
	err := s.do(ctx, what, s.execLimit(req), nil, func(ctx context.Context) error {
		var err error
		res, err = call(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.finishExec(ctx, lw, res)
	return res, nil
}

// fileCall runs call, one file call (upload, unpack, read, list), under
// the call's deadline, which grows with the bytes count sees move
// (fileCallLimit), and Sandbox.do's diagnosis of a failure.
func fileCall[T any](ctx context.Context, s *Sandbox, what string, call func(ctx context.Context, count func(io.Reader) io.Reader) (T, error)) (T, error) {
	var out, zero T
	if err := s.check(); err != nil {
		return zero, err
	}
	file := s.b.fileCallLimit()
	err := s.do(ctx, what, 0, file, func(ctx context.Context) error {
		var err error
		out, err = call(ctx, file.count)
		return err
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// WriteFile uploads r to /app/name, a plain name (goruntime.CheckName).
// Errors wrap ErrPathEscape for a bad name, fs.ErrPermission when the
// sandbox's user may not write there, ErrTooLarge over the upload limit.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := goruntime.CheckName(name); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	_, err := fileCall(ctx, s, "upload "+name, func(ctx context.Context, count func(io.Reader) io.Reader) (struct{}, error) {
		return struct{}{}, s.cl.Upload(ctx, name, r, count)
	})
	return err
}

// Unpack writes the files of a tar archive under /app through the
// server's /unpack (goruntime.UnpackingSandbox). Errors wrap
// ErrPathEscape, fs.ErrPermission, ErrTooLarge, or errors.ErrUnsupported
// when the server predates /unpack (a sandbox reattached from an older
// version).
func (s *Sandbox) Unpack(ctx context.Context, r io.Reader) error {
	_, err := fileCall(ctx, s, "unpack", func(ctx context.Context, count func(io.Reader) io.Reader) (struct{}, error) {
		return struct{}{}, s.cl.Unpack(ctx, r, count)
	})
	return err
}

// ReadFile returns the content of a file under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the file is inside /app but the sandbox's user may not
// read it, e.g. a command made it mode 000).
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return fileCall(ctx, s, "read "+path, func(ctx context.Context, count func(io.Reader) io.Reader) ([]byte, error) {
		return s.cl.Download(ctx, path, count)
	})
}

// ReadFileRange returns at most n bytes of a file under /app from byte
// off (goruntime.RangeReader), fetched with an HTTP Range request so only
// those bytes cross the socket; none at or past the end. Errors wrap
// ErrNotExist, ErrPathEscape or fs.ErrPermission as ReadFile's do.
func (s *Sandbox) ReadFileRange(ctx context.Context, path string, off int64, n int) ([]byte, error) {
	return fileCall(ctx, s, "read "+path, func(ctx context.Context, count func(io.Reader) io.Reader) ([]byte, error) {
		return s.cl.DownloadRange(ctx, path, off, n, count)
	})
}

// List returns the entries of a directory under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the directory is inside /app but the sandbox's user
// may not read it).
func (s *Sandbox) List(ctx context.Context, path string) ([]goruntime.FileInfo, error) {
	return fileCall(ctx, s, "list "+path, func(ctx context.Context, count func(io.Reader) io.Reader) ([]goruntime.FileInfo, error) {
		return s.cl.List(ctx, path, count)
	})
}
