package goruntime

import (
	"context"
	"io"
	"syscall"
	"time"
)

// Backend provisions sandboxes. Each backend lives in its own package:
// local (bubblewrap on this machine) and agentsandbox (Kubernetes through
// kubernetes-sigs/agent-sandbox).
type Backend interface {
	// Name is a short lower-case name for logs and errors ("local", "agent-sandbox").
	Name() string
	// Open provisions a new sandbox and returns once its runtime server answers.
	Open(ctx context.Context) (Sandbox, error)
	// Attach reconnects to a running sandbox by the ID an earlier Sandbox.ID
	// returned. It fails with an error wrapping ErrSandboxNotFound when no
	// such sandbox exists.
	Attach(ctx context.Context, id string) (Sandbox, error)
}

// Sandbox is one running sandbox as a backend exposes it: the operations of
// the agent-sandbox runtime contract, spoken to our runtime server
// (cmd/sandbox-server) inside the sandbox. Paths are relative to the
// sandbox's work directory (/app). Session builds on this; most callers
// want Session, not Sandbox.
type Sandbox interface {
	// ID names the sandbox for Backend.Attach: a directory name for the
	// local backend, a SandboxClaim name for agent-sandbox.
	ID() string
	// Exec runs req.Command with /bin/sh -c in the work directory. A
	// command that runs and exits non-zero is not an error: the exit code
	// is in the result. Errors mean the command could not be run or its
	// result was lost (ErrSandboxGone, a transport failure, ctx done), or
	// req was refused before anything was sent (ExecRequest.Validate,
	// which the backend calls on entry). The backend owns the client-side
	// deadline: it waits req.Timeout (or its default) plus a grace it
	// picks for its transport, so a command the server killed still
	// returns its partial output.
	Exec(ctx context.Context, req ExecRequest) (*ExecResult, error)
	// WriteFile streams r into the work directory under name, a plain file
	// name (CheckName: the agent-sandbox SDK refuses sub-paths). Use
	// Session.Execute to place a tree of files.
	WriteFile(ctx context.Context, name string, r io.Reader) error
	// ReadFile returns the bytes of a file under the work directory. Errors
	// wrap ErrNotExist when it is missing and ErrPathEscape when the path
	// leaves the work directory.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// List returns the entries of a directory under the work directory.
	// Errors wrap ErrNotExist when path is missing or not a directory.
	List(ctx context.Context, path string) ([]FileInfo, error)
	// Close destroys the sandbox and everything in it.
	Close(ctx context.Context) error
	// Disconnect releases this client's resources and leaves the sandbox
	// running, to be reattached by ID.
	Disconnect(ctx context.Context) error
}

// StreamingSandbox is implemented by sandboxes whose backend can stream a
// command's output as it is produced (the sandboxd gRPC API).
type StreamingSandbox interface {
	Sandbox
	// ExecStream is Exec, calling onChunk for each piece of output as it
	// arrives (from one goroutine, in order) before returning the result.
	ExecStream(ctx context.Context, req ExecRequest, onChunk func(Chunk)) (*ExecResult, error)
}

// UnpackingSandbox is implemented by sandboxes whose runtime server
// unpacks a tar archive itself (POST /unpack, docs/sandbox-server.md), so
// a Session ships a call's files in one request without starting a tar
// process in the sandbox.
type UnpackingSandbox interface {
	Sandbox
	// Unpack writes the regular files of the tar archive r (as
	// WriteArchive makes it) under /app, each file whole, with its mode and
	// the current time; a symlink at a file's path is replaced, one on a
	// parent's path is followed only inside /app. Errors wrap
	// ErrPathEscape, fs.ErrPermission, ErrTooLarge (the files' content is
	// over the server's upload limit), or errors.ErrUnsupported when the
	// sandbox's server predates /unpack (upload the archive and unpack it
	// with tar instead); others name what was in the way.
	Unpack(ctx context.Context, r io.Reader) error
}

// UnpackExecSandbox is implemented by sandboxes whose runtime server
// takes a call's files and its command in one request (POST
// /unpack-execute, docs/sandbox-server.md): a Session saves a round trip
// on each call that sends files.
type UnpackExecSandbox interface {
	Sandbox
	// UnpackExec writes the files of archive (as WriteArchive makes it,
	// at most 1 MiB: larger ones take Unpack) as UnpackingSandbox.Unpack does,
	// then runs req as Exec does. When the files are not all written the
	// command does not run and the error is a *FilesError holding what
	// Unpack would have returned; errors.ErrUnsupported (not in a
	// FilesError) when the sandbox's server predates the request (send
	// the files with Unpack, then Exec).
	UnpackExec(ctx context.Context, archive []byte, req ExecRequest) (*ExecResult, error)
}

// FilesError is UnpackExec's error when a call's files could not be
// written: its command did not run.
type FilesError struct{ Err error }

func (e *FilesError) Error() string { return e.Err.Error() }
func (e *FilesError) Unwrap() error { return e.Err }

// Stream names an output stream.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Chunk is a piece of output from a running command.
type Chunk struct {
	Stream Stream
	Data   []byte
}

// ExecRequest is one command for Sandbox.Exec.
type ExecRequest struct {
	// Command is a shell command line, run with /bin/sh -c in /app.
	Command string
	// Env adds to (and overrides) the sandbox's environment for this command.
	Env map[string]string
	// Timeout bounds the command's wall time; when it passes, the whole
	// process group is killed and ExecResult.TimedOut is set. Zero means the
	// sandbox's default (SANDBOX_EXEC_TIMEOUT_SECONDS, 300 s).
	Timeout time.Duration
	// Dir is the working directory, a path relative to /app ("" means
	// /app). It is passed as data, never through the shell; a path that
	// leaves /app or does not exist makes the command fail to start (an
	// error wrapping ErrPathEscape or ErrNotExist).
	Dir string
	// Stdin, when not nil, is copied to the command's standard input, which
	// is closed at EOF; nil gives the command an empty input. Only a
	// backend that speaks the sandboxd process API feeds it (the
	// agent-sandbox backend outside Gateway mode, the local backend's
	// ExecStream); the others refuse a request that sets it.
	Stdin io.Reader
	// Signals, when not nil, carries signals for the running command:
	// each one received is sent to the command's process group while it
	// runs. SIGINT, SIGTERM and SIGKILL are supported; others are refused
	// when received (the command keeps running). Like Stdin it needs the
	// process API.
	Signals <-chan syscall.Signal
}

// NeedsProcessAPI reports whether r uses a field only the sandboxd process
// API can carry (Stdin, Signals, a Dir other than /app), so a backend's
// path without it (the runtime contract's /execute) can refuse it.
func (r ExecRequest) NeedsProcessAPI() bool {
	return r.Stdin != nil || r.Signals != nil || (r.Dir != "" && r.Dir != ".")
}

// ExecResult is what the runtime server reported for one command.
type ExecResult struct {
	// Stdout and Stderr are the command's output as the server returned it:
	// capped by the server (8 MiB a stream by default) and with bytes that are
	// not UTF-8 replaced by U+FFFD.
	Stdout, Stderr string
	// ExitCode is the process's exit status; 124 when the deadline killed
	// it, 128+N when signal N did (the convention of internal/wire's
	// ExitTimedOut and SignalExitCode).
	ExitCode int
	// StdoutTruncated and StderrTruncated report that the server dropped
	// output beyond its cap.
	StdoutTruncated, StderrTruncated bool
	// TimedOut reports that the deadline killed the command.
	TimedOut bool
	// Limit names the sandbox limit the command ran into, if the backend
	// can tell (LimitMemory, LimitProcesses, LimitFileSize, LimitDisk,
	// LimitOutput); empty otherwise.
	Limit Limit
	// DiskCounted reports that the backend tells a full disk quota from
	// the disk's own counters (the local backend), so a Limit other than
	// LimitDisk means the quota was not hit: Classify then does not take
	// "no space left on device" in the output for the disk limit (a
	// command can print it, and ENOSPC has other causes, e.g. no pty
	// left in /dev/ptmx).
	DiskCounted bool
	// Duration is the command's wall time as the server measured it; zero
	// when the server does not report it.
	Duration time.Duration
	// CPU is the CPU time (user and system) of the command and of the
	// descendants it waited for, as the server measured it; zero when the
	// server does not report it.
	CPU time.Duration
}

// Limit names a per-sandbox resource limit.
type Limit string

const (
	LimitMemory    Limit = "memory"
	LimitProcesses Limit = "processes"
	LimitFileSize  Limit = "file_size"
	LimitOutput    Limit = "output"
	// LimitDisk: the sandbox's writable storage ran out of its byte or
	// inode quota (ENOSPC); the backend appends a note to Stderr naming
	// which.
	LimitDisk Limit = "disk"
)

// FileInfo is one directory entry as the runtime contract's List reports it.
type FileInfo struct {
	Name    string
	Size    int64 // bytes
	IsDir   bool
	ModTime time.Time
}

// InspectableSandbox is implemented by sandboxes whose runtime server can
// be asked about itself (the sandboxd REST API: GET /v1/health and
// /v1/metadata).
type InspectableSandbox interface {
	Sandbox
	// Health reports whether the sandbox's runtime server is serving.
	// Errors: the server is unreachable (wrapping ErrSandboxGone) or
	// shutting down (an error naming the 503).
	Health(ctx context.Context) (*Health, error)
	// Metadata returns what the orchestrator told the sandbox about
	// itself: the runtime server's SANDBOX_* environment variables, names
	// that look secret (TOKEN, KEY, PASSWORD...) withheld.
	Metadata(ctx context.Context) (*Metadata, error)
}

// Health is a runtime server's answer to a health check.
type Health struct {
	// Status is "ok" when the server serves.
	Status string
	// Uptime is how long the server has run, to the second.
	Uptime time.Duration
}

// Metadata is the sandbox's view of itself.
type Metadata struct {
	// Env holds the runtime server's SANDBOX_* environment variables.
	Env map[string]string
}
