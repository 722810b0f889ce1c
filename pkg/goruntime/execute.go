package goruntime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// Execute writes req.Files under /app, runs req.Command and reports what
// happened. A command that fails (non-zero exit, build error, timeout) is
// not an error: see Result.Outcome. Errors mean the request was refused
// (a bad file path: ErrPathEscape) or the sandbox could not run it
// (ErrSandboxGone, ErrClosed, transport failures, ctx done).
func (s *Session) Execute(ctx context.Context, req Request) (*Result, error) {
	return s.execute(ctx, req, nil)
}

// ExecuteStream is Execute, calling onChunk with output as it is produced
// when the backend can stream (StreamingSandbox). Otherwise onChunk is
// called once per stream with the whole (untruncated by the session) output
// after the command ends. onChunk runs on one goroutine, in order.
func (s *Session) ExecuteStream(ctx context.Context, req Request, onChunk func(Chunk)) (*Result, error) {
	return s.execute(ctx, req, onChunk)
}

func (s *Session) execute(ctx context.Context, req Request, onChunk func(Chunk)) (*Result, error) {
	if err := ValidateFiles(req.Files); err != nil {
		return nil, err
	}
	if err := ValidateEnv(req.Env); err != nil {
		return nil, err
	}
	env, terr := s.toolchainEnv(ctx, req.GoVersion, raceEnv(req.Command, req.Env))
	if terr != nil {
		return nil, terr
	}
	s.run.Lock()
	defer s.run.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	_, streams := s.sb.(StreamingSandbox)
	streams = streams && onChunk != nil
	hasCommand := strings.TrimSpace(req.Command) != ""
	var archive []byte // the files, when they go with the command
	if len(req.Files) > 0 {
		if hasCommand && !streams {
			archive = s.inlineArchive(req.Files)
		}
		if archive == nil {
			if err := s.writeFiles(ctx, req.Files); err != nil {
				return nil, err
			}
		}
	}
	if !hasCommand {
		return &Result{Outcome: OutcomeOK}, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = s.opts.DefaultTimeout
	}
	// The backend bounds the call: it knows its transport and waits a
	// grace past the timeout for the partial output (see Sandbox.Exec).
	ereq := ExecRequest{Command: req.Command, Env: env, Timeout: timeout}

	start := time.Now()
	var (
		er  *ExecResult
		err error
	)
	// Each way's errors name what failed: the files (filesError) or the
	// command (runError).
	switch {
	case archive != nil:
		er, err = s.unpackExec(ctx, archive, req.Files, ereq, onChunk)
	case streams:
		er, err = s.sb.(StreamingSandbox).ExecStream(ctx, ereq, onChunk)
		err = runError(ereq, err)
	default:
		er, err = ExecWhole(ctx, s.sb, ereq, onChunk)
		err = runError(ereq, err)
	}
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	if er.Duration > 0 {
		elapsed = er.Duration
	}
	res := &Result{
		ExitCode:        er.ExitCode,
		Duration:        elapsed,
		CPU:             er.CPU,
		StdoutTruncated: er.StdoutTruncated,
		StderrTruncated: er.StderrTruncated,
		Outcome:         Classify(req.Command, er),
	}
	s.analyze(ctx, req, er, res)
	res.Stdout, res.StdoutElided = HeadTail(er.Stdout, s.opts.HeadBytes, s.opts.TailBytes)
	res.Stderr, res.StderrElided = HeadTail(er.Stderr, s.opts.HeadBytes, s.opts.TailBytes)
	res.StdoutTruncated = res.StdoutTruncated || res.StdoutElided > 0
	res.StderrTruncated = res.StderrTruncated || res.StderrElided > 0
	s.opts.Logger.DebugContext(ctx, "execute", "backend", s.backend, "sandbox", s.sb.ID(),
		"command", clip.String(req.Command, 120), "exit_code", res.ExitCode, "outcome", res.Outcome,
		"duration_ms", res.Duration.Milliseconds())
	return res, nil
}

// ExecWhole is the fallback for a sandbox that cannot stream: it runs req
// with sb.Exec and, when onChunk is not nil, passes each stream's whole
// output to it once the command has ended (stdout, then stderr).
func ExecWhole(ctx context.Context, sb Sandbox, req ExecRequest, onChunk func(Chunk)) (*ExecResult, error) {
	res, err := sb.Exec(ctx, req)
	if err == nil {
		chunkWhole(res, onChunk)
	}
	return res, err
}

// chunkWhole passes each stream's whole output to onChunk, if not nil.
func chunkWhole(res *ExecResult, onChunk func(Chunk)) {
	if onChunk == nil {
		return
	}
	if res.Stdout != "" {
		onChunk(Chunk{Stream: Stdout, Data: []byte(res.Stdout)})
	}
	if res.Stderr != "" {
		onChunk(Chunk{Stream: Stderr, Data: []byte(res.Stderr)})
	}
}

// inlineArchive returns the archive of files when they can go with the
// command in one request (UnpackExecSandbox; at most
// wire.MaxInlineArchiveBytes), else nil.
func (s *Session) inlineArchive(files []File) []byte {
	if _, ok := s.sb.(UnpackExecSandbox); !ok || s.twoStep {
		return nil
	}
	size := 0
	for _, f := range files {
		size += len(f.Data)
	}
	if size > wire.MaxInlineArchiveBytes {
		return nil
	}
	var buf bytes.Buffer
	if err := writeArchive(&buf, files); err != nil || buf.Len() > wire.MaxInlineArchiveBytes {
		return nil // writeFiles builds it again and says what is wrong
	}
	return buf.Bytes()
}

// unpackExec writes files (their archive) and runs req in one request;
// against a server that predates it, in two, from then on.
func (s *Session) unpackExec(ctx context.Context, archive []byte, files []File, req ExecRequest, onChunk func(Chunk)) (*ExecResult, error) {
	res, err := s.sb.(UnpackExecSandbox).UnpackExec(ctx, archive, req)
	var filesErr *FilesError
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		s.twoStep = true
		if err := s.writeFiles(ctx, files); err != nil {
			return nil, err
		}
		res, err := ExecWhole(ctx, s.sb, req, onChunk)
		return res, runError(req, err)
	case errors.As(err, &filesErr):
		return nil, filesError("unpack", files, err)
	case err != nil:
		return nil, runError(req, err)
	}
	chunkWhole(res, onChunk)
	return res, nil
}

// runError names the command whose run failed; nil stays nil.
func runError(req ExecRequest, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("run %q: %w", clip.String(req.Command, 80), err)
}

// errUploadEnded stops an archive writer whose upload returned.
var errUploadEnded = errors.New("upload ended")

// writeFiles ships files as one tar archive and unpacks it inside the
// sandbox: with the server's /unpack when the sandbox has it
// (UnpackingSandbox), else as an uploaded file that tar unpacks.
// execute has checked files with ValidateFiles.
func (s *Session) writeFiles(ctx context.Context, files []File) error {
	if us, ok := s.sb.(UnpackingSandbox); ok && !s.tarUnpack {
		err := streamArchive(files, func(r io.Reader) error { return us.Unpack(ctx, r) })
		if !errors.Is(err, errors.ErrUnsupported) {
			return filesError("unpack", files, err)
		}
		s.tarUnpack = true
	}
	name := ".goruntime-upload-" + randomHex(8) + ".tar"
	err := streamArchive(files, func(r io.Reader) error { return s.sb.WriteFile(ctx, name, r) })
	if err != nil {
		return filesError("upload", files, err)
	}
	// --no-same-owner: files belong to the sandbox user. -m: stamp them now,
	// so tools that look at mtimes see fresh files.
	cmd := fmt.Sprintf("tar -xf %s --no-same-owner -m; rc=$?; rm -f %s; exit $rc", name, name)
	er, err := s.sb.Exec(ctx, ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("unpack %d files: %w", len(files), err)
	}
	if er.ExitCode != 0 {
		return fmt.Errorf("unpack %d files in the work directory: tar exited %d: %s%s", len(files), er.ExitCode, clip.String(er.Stderr, 500), unpackHint(er.Stderr))
	}
	return nil
}

// inMemoryArchiveBytes is the most file data streamArchive packs in
// memory before sending; more is streamed.
const inMemoryArchiveBytes = 1 << 20

// streamArchive passes send a reader of files' tar archive (files
// checked by the caller with ValidateFiles). Up to inMemoryArchiveBytes
// of file data it is built first and sent whole (a *bytes.Reader, so an
// HTTP request announces its length and goes out in one write: the
// usual call's few source files). A larger one is written as send reads
// it: neither built in memory first nor copied (fresh memory is slow to
// touch in a VM: 300 MiB took 4.6 s before a sandbox refused it).
func streamArchive(files []File, send func(io.Reader) error) error {
	var size int
	for _, f := range files {
		size += len(f.Data)
	}
	if size <= inMemoryArchiveBytes {
		var buf bytes.Buffer
		if err := writeArchive(&buf, files); err != nil {
			return err
		}
		return send(bytes.NewReader(buf.Bytes()))
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(pw, files)) }()
	err := send(pr)
	pr.CloseWithError(errUploadEnded) // stops the writer if send returned early
	return err
}

// filesError wraps the error of shipping files (what: "upload" or
// "unpack"); one over the size limit says by how much and what to do.
func filesError(what string, files []File, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrDiskFull):
		return fmt.Errorf("%s %d files: %w; the call's command did not run: free space with a call that sends no files (e.g. rm -rf of what filled it) or reset the sandbox, then send the files again", what, len(files), err)
	case errors.Is(err, ErrTooLarge):
		var total int64
		for _, f := range files {
			total += int64(len(f.Data))
		}
		return fmt.Errorf("%s %d files: their archive (%d MiB of file data) is over the sandbox's upload limit (the runtime server's --max-upload-bytes, 256 MiB by default); send fewer or smaller files per call: %w",
			what, len(files), total>>20, err)
	}
	return fmt.Errorf("%s %d files: %w", what, len(files), err)
}

// unpackHint explains tar's "Cannot open" and "Cannot mkdir" when files
// were being written: what the sandbox's earlier commands left on a
// file's path is in the way.
func unpackHint(stderr string) string {
	if !strings.Contains(stderr, "Cannot open") && !strings.Contains(stderr, "Cannot mkdir") {
		return ""
	}
	return " (something on the file's path is in the way: a directory there that is a symlink to a place the sandbox cannot write, such as /etc, or a file where the path needs a directory; look with `ls -l`)"
}

// Reset empties /app and keeps the build and module caches.
func (s *Session) Reset(ctx context.Context) error {
	s.run.Lock()
	defer s.run.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	const cmd = "chmod -R u+w . 2>/dev/null; find . -mindepth 1 -delete"
	er, err := s.sb.Exec(ctx, ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("reset sandbox %s: %w", s.sb.ID(), err)
	}
	if er.ExitCode != 0 {
		return fmt.Errorf("reset sandbox %s: exit %d: %s", s.sb.ID(), er.ExitCode, clip.String(er.Stderr, 500))
	}
	return nil
}

// ReadFile returns a file under /app, at most MaxReadFileBytes of it.
// Errors wrap ErrNotExist, ErrPathEscape, or ErrTooLarge for a larger
// file (read those with ReadFileRange).
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.sb.ReadFile(ctx, path)
}

// List returns the entries of a directory under /app ("." for /app itself).
func (s *Session) List(ctx context.Context, path string) ([]FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.sb.List(ctx, path)
}

func (s *Session) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close destroys the sandbox, without waiting for a running Execute (which
// then returns an error). Calling it again returns nil.
func (s *Session) Close(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.sb.Close(ctx)
}

// Disconnect leaves the sandbox running for a later Attach by ID. It does
// not wait for a running Execute, which goes on in the sandbox while this
// client stops waiting for it.
func (s *Session) Disconnect(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.sb.Disconnect(ctx)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
