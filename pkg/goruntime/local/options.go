package local

import (
	"log/slog"
	"runtime"
	"time"
)

// Options configure the local backend. The zero value gives the defaults
// documented on each field.
type Options struct {
	// StateDir holds one directory per sandbox (sandboxes/<id>/: work
	// directory, home, tmp, socket, pid file, log) and the seed build
	// cache (seed/). Default: os.UserCacheDir()/go-runtime-sandbox.
	StateDir string

	// ServerPath is the runtime server binary run inside bubblewrap. When
	// empty: $GORUNTIME_SANDBOX_SERVER, else a "sandbox-server" next to
	// os.Executable(), else os.Executable() itself, whose main must call
	// ServeIfChild first thing.
	ServerPath string

	// BwrapPath is the bubblewrap binary; default "bwrap" on $PATH.
	BwrapPath string

	// GoRoot is the Go installation bound read-only into every sandbox at
	// the same path; default the GOROOT of the "go" on $PATH.
	GoRoot string

	// ModCache is the host module cache bound read-only into every sandbox
	// (modules resolve offline from it); default `go env GOMODCACHE`.
	ModCache string

	// Network gives sandboxes the host's network (and GOPROXY from the
	// host's go env) instead of a private loopback-only network. Default
	// false: no network, modules only from ModCache.
	Network bool

	// MemoryBytes caps the memory (RAM+swap) of all processes in a
	// sandbox; the kernel OOM-kills past it. Default 1 GiB. GOMEMLIMIT is
	// set to 90% of it.
	MemoryBytes int64

	// Processes caps the tasks (processes and threads) alive at once in a
	// sandbox. Default 512.
	Processes int

	// CPUs caps the CPU time a sandbox gets per wall-clock second, in
	// CPUs, and sets GOMAXPROCS. Default runtime.NumCPU().
	CPUs int

	// FileSizeBytes caps the size of any single file a sandbox writes
	// (RLIMIT_FSIZE); a write past it fails with EFBIG ("file too large").
	// Default 1 GiB.
	FileSizeBytes int64

	// OutputBytes caps each output stream (stdout, stderr) the server
	// returns for one command; the rest is dropped and reported as
	// truncated. Default 8 MiB (the agent-sandbox SDK decodes at most
	// 16 MiB of JSON).
	OutputBytes int64

	// ExecTimeout is the wall time a command gets when its ExecRequest has
	// no Timeout. Default 300 s.
	ExecTimeout time.Duration

	// StartTimeout bounds how long Open waits for the runtime server to
	// answer. Default 15 s.
	StartTimeout time.Duration

	// Logger receives debug logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults, see Options.
const (
	DefaultMemoryBytes   = 1 << 30
	DefaultProcesses     = 512
	DefaultFileSizeBytes = 1 << 30
	DefaultOutputBytes   = 8 << 20
	DefaultExecTimeout   = 300 * time.Second
	DefaultStartTimeout  = 15 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.Processes <= 0 {
		o.Processes = DefaultProcesses
	}
	if o.CPUs <= 0 {
		o.CPUs = runtime.NumCPU()
	}
	if o.FileSizeBytes <= 0 {
		o.FileSizeBytes = DefaultFileSizeBytes
	}
	if o.OutputBytes <= 0 {
		o.OutputBytes = DefaultOutputBytes
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = DefaultExecTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.BwrapPath == "" {
		o.BwrapPath = "bwrap"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
