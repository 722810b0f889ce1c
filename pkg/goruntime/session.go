package goruntime

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// File is one file for Request.Files.
type File struct {
	// Path is relative to /app and may contain "/" (parents are created).
	// Absolute paths and ".." elements are refused.
	Path string
	// Data is the file's content.
	Data []byte
	// Mode holds the permission bits (0644 when zero). Only the permission
	// bits (0777) are kept.
	Mode fs.FileMode
}

// Request is one Execute call.
type Request struct {
	// Files are written under /app before Command runs, all in one archive.
	Files []File
	// Command is a shell command line (sh -c) run in /app. Empty means only
	// write Files.
	Command string
	// Timeout bounds Command's wall time; zero means Options.DefaultTimeout.
	Timeout time.Duration
	// Env adds to the command's environment.
	Env map[string]string

	// GoVersion names the Go toolchain the command's go runs, e.g.
	// "1.25.9" (or "go1.25.9"); empty means the sandbox's own. Other
	// versions come from golang.org/toolchain modules provisioned on the
	// host (cmd/toolchains; docs/go-aware.md) and resolve offline; one the
	// sandbox does not have is refused with ErrToolchainUnavailable,
	// listing those it has. The first command with a version unpacks it
	// in the sandbox (about 250 MB, a few seconds) and its first build
	// compiles the standard library.
	GoVersion string

	// eventsAsText: Command prints a go test JSON event stream; return
	// its text as Stdout (Session.Test).
	eventsAsText bool
}

// Result is what one Execute produced.
type Result struct {
	// Stdout and Stderr are the command's output after head+tail truncation
	// (Options.HeadBytes + Options.TailBytes per stream), with a marker line
	// saying how many bytes were elided.
	Stdout, Stderr string
	// ExitCode is the command's exit status (124 on timeout, 128+N for
	// signal N).
	ExitCode int
	// Duration is the wall time of the command, as measured by the server
	// when it reports it, else by the client around the call.
	Duration time.Duration
	// CPU is the command's CPU time (ExecResult.CPU); zero when the
	// backend does not report it.
	CPU time.Duration
	// StdoutTruncated and StderrTruncated report that output was cut,
	// by the session's head+tail window or by the server's cap.
	StdoutTruncated, StderrTruncated bool
	// StdoutElided and StderrElided count the bytes removed by the head+tail
	// window (not counting what the server's cap dropped).
	StdoutElided, StderrElided int
	// Outcome classifies the run from the exit code and the go tool's output.
	Outcome Outcome

	// Diagnostics are the findings the go tool printed, parsed from the
	// whole output (before the head+tail window): compile and type errors
	// when a build failed, go vet's findings, gofmt -d's differences,
	// failing tests' t.Error positions. Paths are relative to /app. At
	// most 500; Stdout and Stderr still hold the raw text.
	Diagnostics []Diagnostic
	// Tests are the tests and subtests of a go test command, in the order
	// they ran (at most 2000; each Output cut to 4 KiB head + 4 KiB tail).
	// With -json in the command they come from its event stream; otherwise
	// from the go tool's test2json run over its text in the sandbox, so a
	// plain `go test` (no -v) lists only the tests it printed (failures),
	// and `go test -v` lists them all. The command itself is not changed:
	// Stdout is what it printed. Session.Test lists every test.
	Tests []TestResult
	// Benchmarks are the benchmark result lines of a go test -bench run.
	Benchmarks []Benchmark
	// Coverage is each package's statement coverage of a go test -cover run.
	Coverage []Coverage
}

// Options tune a Session. The zero value gives the defaults.
type Options struct {
	// HeadBytes and TailBytes size the head+tail window kept of each output
	// stream; defaults 8 KiB each. Negative means keep everything.
	HeadBytes, TailBytes int
	// DefaultTimeout applies to a Request with no Timeout; default 60 s.
	DefaultTimeout time.Duration
	// Logger receives debug logs; nil means slog.Default().
	Logger *slog.Logger
	// Progress, when set, receives reports on long steps of Open and
	// Attach (the local backend says once that a sandbox opened on a
	// fresh machine starts without its one-time seed build cache, and how
	// far its build is); see Progress and WithProgress.
	Progress func(Progress)
}

const (
	defaultHeadBytes = 8 << 10
	defaultTailBytes = 8 << 10
	defaultTimeout   = 60 * time.Second
)

func (o Options) withDefaults() Options {
	if o.HeadBytes == 0 {
		o.HeadBytes = defaultHeadBytes
	}
	if o.TailBytes == 0 {
		o.TailBytes = defaultTailBytes
	}
	if o.DefaultTimeout == 0 {
		o.DefaultTimeout = defaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Session is one sandbox and the calls made in it. Its methods are safe for
// concurrent use; Execute and Reset calls run one at a time. Close and
// Disconnect do not wait for a running Execute: Close destroys the sandbox
// at once and the running call returns an error.
type Session struct {
	sb      Sandbox
	backend string
	opts    Options

	run    sync.Mutex  // serializes Execute and Reset
	closed atomic.Bool // set by Close or Disconnect
	// tarUnpack: the sandbox's server answered that it cannot /unpack, so
	// files go up as one file that tar unpacks. Guarded by run.
	tarUnpack bool
	// twoStep: the sandbox's server answered that it cannot take a
	// call's files with its command (UnpackExecSandbox), so they go first.
	twoStep bool
}

// Open provisions a new sandbox from b.
func Open(ctx context.Context, b Backend, opts Options) (*Session, error) {
	sb, err := b.Open(WithProgress(ctx, opts.Progress))
	if err != nil {
		return nil, fmt.Errorf("open %s sandbox: %w", b.Name(), err)
	}
	return &Session{sb: sb, backend: b.Name(), opts: opts.withDefaults()}, nil
}

// Attach reconnects to the sandbox with the given ID (from Session.ID).
func Attach(ctx context.Context, b Backend, id string, opts Options) (*Session, error) {
	sb, err := b.Attach(WithProgress(ctx, opts.Progress), id)
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err) // the backend names the sandbox
	}
	return &Session{sb: sb, backend: b.Name(), opts: opts.withDefaults()}, nil
}

// NewSession wraps a Sandbox already opened by a backend.
func NewSession(sb Sandbox, opts Options) *Session {
	return &Session{sb: sb, opts: opts.withDefaults()}
}

// ID names the sandbox for Attach.
func (s *Session) ID() string { return s.sb.ID() }

// Sandbox returns the underlying sandbox.
func (s *Session) Sandbox() Sandbox { return s.sb }
