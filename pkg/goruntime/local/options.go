package local

import (
	"fmt"
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
	// sandbox; the kernel OOM-kills past it. Default 1 GiB, at least
	// MinMemoryBytes. GOMEMLIMIT is set to 90% of it.
	MemoryBytes int64

	// Processes caps the tasks (processes and threads) alive at once in a
	// sandbox. Default 512, at least MinProcesses.
	Processes int

	// CPUs caps the CPU time a sandbox gets per wall-clock second, in
	// CPUs, and sets GOMAXPROCS. Default runtime.NumCPU(), which is also
	// the most it may be: New rejects more CPUs than the machine has.
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

	// WarmPool is how many sandboxes the backend keeps started ahead
	// (runtime server answering, build cache linked), so that Open claims
	// one in microseconds instead of starting one. They run under the same
	// limits and isolation as any sandbox, die with this process, and are
	// refilled in the background after each claim; when none is ready,
	// Open starts its sandbox itself. Backend.Close ends them. Default
	// DefaultWarmPool (0 means the default); negative disables the pool.
	WarmPool int

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
	DefaultWarmPool      = 2

	// MinMemoryBytes is the smallest MemoryBytes New accepts: the runtime
	// server (~13 MB resident), the sandbox's shells and a command's first
	// process must fit, with room left for the command; below it a sandbox
	// cannot start its server.
	MinMemoryBytes = 64 << 20
	// MinProcesses is the smallest Processes New accepts: the sandbox's
	// own processes (bubblewrap's init, the lifeline shell and its watcher)
	// and the runtime server's threads take about a dozen tasks before a
	// command starts.
	MinProcesses = 16
)

// validate rejects limits a sandbox cannot work under, naming the option
// (and the flag of internal/frontend/backendflag that sets it).
func (o Options) validate() error {
	switch {
	case o.MemoryBytes < MinMemoryBytes:
		return fmt.Errorf("local backend: memory limit %d bytes (Options.MemoryBytes, --memory-mb=%d) is below the minimum of %d MiB: "+
			"the runtime server and the sandbox's shells need about that much before any command runs",
			o.MemoryBytes, o.MemoryBytes>>20, MinMemoryBytes>>20)
	case o.Processes < MinProcesses:
		return fmt.Errorf("local backend: process limit %d (Options.Processes, --processes) is below the minimum of %d: "+
			"the sandbox's own processes and the runtime server's threads take about a dozen tasks", o.Processes, MinProcesses)
	case o.CPUs > runtime.NumCPU():
		return fmt.Errorf("local backend: CPU limit %d (Options.CPUs, --cpus) is more than the %d CPUs of this machine: "+
			"set at most %d, or 0 for all", o.CPUs, runtime.NumCPU(), runtime.NumCPU())
	}
	return nil
}

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
	if o.WarmPool == 0 {
		o.WarmPool = DefaultWarmPool
	}
	if o.BwrapPath == "" {
		o.BwrapPath = "bwrap"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
