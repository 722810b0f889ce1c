package goruntime

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// transportGrace is how much longer than a command's timeout the client
// waits for the server's answer, so a timed-out command still returns its
// partial output instead of a transport error.
const transportGrace = 15 * time.Second

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
	s.run.Lock()
	defer s.run.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if len(req.Files) > 0 {
		if err := s.writeFiles(ctx, req.Files); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(req.Command) == "" {
		return &Result{Outcome: OutcomeOK}, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = s.opts.DefaultTimeout
	}
	ereq := ExecRequest{Command: req.Command, Env: req.Env, Timeout: timeout}
	ctx, cancel := context.WithTimeout(ctx, timeout+transportGrace)
	defer cancel()

	start := time.Now()
	var (
		er  *ExecResult
		err error
	)
	if ss, ok := s.sb.(StreamingSandbox); ok && onChunk != nil {
		er, err = ss.ExecStream(ctx, ereq, onChunk)
	} else {
		er, err = ExecWhole(ctx, s.sb, ereq, onChunk)
	}
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", clip(req.Command, 80), err)
	}
	if er.Duration > 0 {
		elapsed = er.Duration
	}
	res := &Result{
		ExitCode:        er.ExitCode,
		Duration:        elapsed,
		StdoutTruncated: er.StdoutTruncated,
		StderrTruncated: er.StderrTruncated,
		Outcome:         Classify(req.Command, er),
	}
	res.Stdout, res.StdoutElided = HeadTail(er.Stdout, s.opts.HeadBytes, s.opts.TailBytes)
	res.Stderr, res.StderrElided = HeadTail(er.Stderr, s.opts.HeadBytes, s.opts.TailBytes)
	res.StdoutTruncated = res.StdoutTruncated || res.StdoutElided > 0
	res.StderrTruncated = res.StderrTruncated || res.StderrElided > 0
	s.opts.Logger.DebugContext(ctx, "execute", "backend", s.backend, "sandbox", s.sb.ID(),
		"command", clip(req.Command, 120), "exit_code", res.ExitCode, "outcome", res.Outcome,
		"duration_ms", res.Duration.Milliseconds())
	return res, nil
}

// ExecWhole is the fallback for a sandbox that cannot stream: it runs req
// with sb.Exec and, when onChunk is not nil, passes each stream's whole
// output to it once the command has ended (stdout, then stderr).
func ExecWhole(ctx context.Context, sb Sandbox, req ExecRequest, onChunk func(Chunk)) (*ExecResult, error) {
	res, err := sb.Exec(ctx, req)
	if err != nil || onChunk == nil {
		return res, err
	}
	if res.Stdout != "" {
		onChunk(Chunk{Stream: Stdout, Data: []byte(res.Stdout)})
	}
	if res.Stderr != "" {
		onChunk(Chunk{Stream: Stderr, Data: []byte(res.Stderr)})
	}
	return res, nil
}

// writeFiles ships files as one tar archive and unpacks it inside the sandbox.
func (s *Session) writeFiles(ctx context.Context, files []File) error {
	archive, err := Archive(files)
	if err != nil {
		return err
	}
	name := ".goruntime-upload-" + randomHex(8) + ".tar"
	if err := s.sb.WriteFile(ctx, name, bytes.NewReader(archive)); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("upload %d files: their archive (%d bytes) is over the sandbox's upload limit: %w",
				len(files), len(archive), ErrTooLarge)
		}
		return fmt.Errorf("upload %d files: %w", len(files), err)
	}
	// --no-same-owner: files belong to the sandbox user. -m: stamp them now,
	// so tools that look at mtimes see fresh files.
	cmd := fmt.Sprintf("tar -xf %s --no-same-owner -m; rc=$?; rm -f %s; exit $rc", name, name)
	er, err := s.sb.Exec(ctx, ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("unpack %d files: %w", len(files), err)
	}
	if er.ExitCode != 0 {
		return fmt.Errorf("unpack %d files: tar exited %d: %s", len(files), er.ExitCode, clip(er.Stderr, 500))
	}
	return nil
}

// ValidateFiles checks that every path is relative, clean of ".." and
// unique. Errors wrap ErrPathEscape and name the path.
func ValidateFiles(files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		p := f.Path
		switch {
		case p == "":
			return fmt.Errorf("file path is empty: %w", ErrPathEscape)
		case strings.ContainsRune(p, 0):
			return fmt.Errorf("file path %q contains a NUL byte: %w", p, ErrPathEscape)
		case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
			return fmt.Errorf("file path %q is absolute: %w", p, ErrPathEscape)
		}
		for _, el := range strings.Split(p, "/") {
			if el == ".." {
				return fmt.Errorf("file path %q contains \"..\": %w", p, ErrPathEscape)
			}
		}
		for _, el := range strings.Split(p, "/") {
			if len(el) > maxNameBytes {
				return fmt.Errorf("file path %q has an element of %d bytes; at most %d", clip(p, 80), len(el), maxNameBytes)
			}
		}
		clean := path.Clean(p)
		if clean == "." {
			return fmt.Errorf("file path %q names the work directory itself: %w", p, ErrPathEscape)
		}
		if strings.HasSuffix(p, "/") {
			return fmt.Errorf("file path %q ends in \"/\": name a file, not a directory", p)
		}
		if seen[clean] {
			return fmt.Errorf("file path %q given twice", p)
		}
		seen[clean] = true
	}
	return nil
}

// maxNameBytes is the longest file name element Linux file systems take
// (NAME_MAX).
const maxNameBytes = 255

// envNameRE is what a POSIX shell passes on to the commands it runs; other
// names would silently disappear.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateEnv checks that every name is a shell variable name
// ([A-Za-z_][A-Za-z0-9_]*) and no value holds a NUL byte.
func ValidateEnv(env map[string]string) error {
	for k, v := range env {
		if !envNameRE.MatchString(k) {
			return fmt.Errorf("environment variable name %q: want [A-Za-z_][A-Za-z0-9_]*", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s: value contains a NUL byte", k)
		}
	}
	return nil
}

// Archive packs files into an uncompressed tar archive with regular-file
// entries only (no links), parents implied. Paths must pass ValidateFiles.
func Archive(files []File) ([]byte, error) {
	if err := ValidateFiles(files); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, f := range files {
		mode := int64(f.Mode.Perm())
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     path.Clean(f.Path),
			Mode:     mode,
			Size:     int64(len(f.Data)),
			ModTime:  now,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return buf.Bytes(), nil
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
		return fmt.Errorf("reset sandbox %s: exit %d: %s", s.sb.ID(), er.ExitCode, clip(er.Stderr, 500))
	}
	return nil
}

// ReadFile returns a file under /app. Errors wrap ErrNotExist or ErrPathEscape.
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

// clip shortens s to at most n bytes for logs and error messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
