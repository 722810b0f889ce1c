package backendflag

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/optionflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/modproxy"
)

// Backend names accepted by --backend.
const (
	Local        = "local"
	AgentSandbox = "agent-sandbox"
)

// Flags holds the parsed backend flags. Register creates it; fields may be
// set before parsing to change the defaults.
type Flags struct {
	// Backend is "local" (the default) or "agent-sandbox".
	Backend string
	// Local configures the local backend.
	Local local.Options
	// AgentSandbox configures the agent-sandbox backend.
	AgentSandbox agentsandbox.Options

	memoryMB int64
	budgetMB int64
	warmPool int
	diskMB   int64
	fileMB   int64
	relax    string
	modules  string
	modMB    int64
	snapMB   int64
	ownerMB  int64
}

// Register adds the backend flags to fs and returns where they land. Call
// it before fs.Parse.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{Backend: Local}
	fs.StringVar(&f.Backend, "backend", f.Backend, "where sandboxes run: local (bubblewrap on this machine) or agent-sandbox (Kubernetes)")
	fs.StringVar(&f.Local.StateDir, "state-dir", "", "local: directory for sandboxes and the seed build cache (default: the user cache dir/go-runtime-sandbox)")
	fs.BoolVar(&f.Local.Network, "sandbox-network", false, "local: give sandboxes the host's network (default: none; modules only from the module cache)")
	fs.Int64Var(&f.memoryMB, "memory-mb", local.DefaultMemoryBytes>>20, "local: memory limit of each sandbox, MiB")
	fs.IntVar(&f.Local.Processes, "processes", local.DefaultProcesses, fmt.Sprintf("local: limit on the processes and threads a sandbox's commands have alive at once (the sandbox's own %d tasks come on top)", local.OwnTasks))
	fs.IntVar(&f.Local.CPUs, "cpus", 0, "local: CPUs each sandbox may use (default: all)")
	fs.IntVar(&f.Local.CPUWeight, "cpu-weight", 0, fmt.Sprintf("local: CPU weight of all sandboxes together against this process's other work on a busy machine, in the kernel's weight of a task (1024: a process at nice 0, 110: nice 10; at most %d) (default: this process's own, from its nice value, so sandboxes never outrank it)", local.MaxCPUWeight))
	fs.IntVar(&f.warmPool, localWarmPoolFlag, local.DefaultWarmPool, "local: how many sandboxes are kept started ahead (the warm pool), so opening one is a claim; 0 disables")
	fs.Int64Var(&f.diskMB, "disk-mb", 0, fmt.Sprintf("local: disk quota of each sandbox (/app, HOME with its caches, /tmp together), MiB (default %d as root; %d otherwise, where the disk is in memory and its processes may use it while it is empty)", local.DefaultDiskBytes>>20, local.DefaultMemoryDiskBytes>>20))
	fs.Int64Var(&f.budgetMB, "memory-budget-mb", 0, "local, not root: the most memory all your sandboxes (of every process) may be promised together, MiB: each its memory limit and its disk, which is in memory; an open past it is refused (default: half the host's memory)")
	fs.Int64Var(&f.fileMB, "file-size-mb", local.DefaultFileSizeBytes>>20, "local: largest single file a sandbox's command may write, MiB (RLIMIT_FSIZE; a write past it ends the command with outcome file_size_limit)")
	fs.IntVar(&f.Local.Connections, "connections", 0, fmt.Sprintf("local: TCP connections a sandbox may have open at once in its own network (default %d, at least %d; a connect past it is refused): connections waiting to be accepted cost the host memory no cgroup counts", local.DefaultConnections, local.MinConnections))
	fs.IntVar(&f.Local.OpenFiles, "open-files", 0, fmt.Sprintf("local: files each process of a sandbox may have open at once (RLIMIT_NOFILE; default %d, lower on a host whose fs.file-max is small, so that one sandbox can take at most 1/16 of the host's open-file table; at least %d)", local.DefaultOpenFiles, local.MinOpenFiles))
	fs.Int64Var(&f.Local.DiskInodes, "disk-inodes", local.DefaultDiskInodes, "local: limit on files and directories in each sandbox")
	fs.StringVar(&f.modules, "allow-modules", "", "local: module path patterns, comma-separated (as GOPRIVATE: a glob per path element, e.g. github.com/foo/*,golang.org/x/text), that sandboxes without a network may download through a module proxy on this host, which fetches them with the host's go command and network (default: none; modules only from the host module cache)")
	fs.Int64Var(&f.modMB, "module-download-mb", modproxy.DefaultMaxDownloadBytes>>20, "local: with --allow-modules, the most the module proxy adds to the host module cache while this process runs, MiB; past it, versions not yet in the cache are refused")
	fs.StringVar(&f.relax, "relax", "", "local: protections to do without on a host that cannot give them, comma-separated: "+strings.Join(local.RelaxNames, ", ")+" (go run ./cmd/sandbox-check shows which this host gives)")
	fs.Int64Var(&f.snapMB, "snapshot-mb", 0, fmt.Sprintf("the most all snapshots may hold together, MiB (local: in the state directory; agent-sandbox: in --snapshot-dir); past it a snapshot is refused (default %d)", local.DefaultSnapshotBytes>>20))
	fs.Int64Var(&f.ownerMB, snapshotOwnerFlag, 0, fmt.Sprintf("local: the most one owner's snapshots (in mcp-server, a principal's; with the snapshots its live forks are layered on) may hold of --snapshot-mb, MiB, so that one owner cannot fill the store for all; past it that owner's snapshot or fork is refused, however much room the others left (0, the default: a quarter of --snapshot-mb, %d with its default; at most --snapshot-mb)", local.DefaultSnapshotBytes/4>>20))
	registerAgentSandbox(fs, &f.AgentSandbox)
	deprecated(fs, "local-warm-pool", localWarmPoolFlag)
	deprecated(fs, "warm-pool", sandboxWarmPoolFlag)
	return f
}

// snapshotOwnerFlag sets the local backend's per-owner share of the
// snapshot quota (local.Options.SnapshotBytesPerOwner); agent-sandbox's
// store has none.
const snapshotOwnerFlag = optionflag.SnapshotPerOwner

// The two warm pools' flags: the local backend's is a count of started
// sandboxes, agent-sandbox's the name of a SandboxWarmPool.
const (
	localWarmPoolFlag   = optionflag.LocalWarmPool
	sandboxWarmPoolFlag = optionflag.SandboxWarmPool
)

// deprecated registers old as an alias of the flag now: it still sets it,
// and says once per use, on fs's output, which name to use instead.
func deprecated(fs *flag.FlagSet, old, now string) {
	target := fs.Lookup(now)
	fs.Func(old, "deprecated: use --"+now, func(v string) error {
		fmt.Fprintf(fs.Output(), "warning: --%s is deprecated; use --%s\n", old, now)
		return target.Value.Set(v)
	})
}

// maxWarmPool bounds --local-warm-pool-size: each pool sandbox is a few
// processes and ~10 MiB kept running.
const maxWarmPool = 64

// New builds the backend the flags name. logger receives the backend's
// logs. Errors name the bad flag; a backend that cannot run here gives an
// error wrapping goruntime.ErrUnavailable that names the fix, with the
// flags for the backend's Options fields (Explain).
func (f *Flags) New(ctx context.Context, logger *slog.Logger) (goruntime.Backend, error) {
	switch f.Backend {
	case Local:
		opts, err := f.localOptions()
		if err != nil {
			return nil, err
		}
		opts.Logger = logger
		b, err := local.New(opts)
		if err != nil {
			return nil, f.Explain(err)
		}
		return b, nil
	case AgentSandbox:
		if f.snapMB < 0 {
			return nil, fmt.Errorf("--snapshot-mb=%d: must not be negative (0: the default)", f.snapMB)
		}
		opts := f.AgentSandbox
		opts.SnapshotBytes = f.snapMB << 20
		opts.Logger = logger
		b, err := agentsandbox.New(ctx, opts)
		if err != nil {
			return nil, f.Explain(err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("--backend=%q: want %q or %q", f.Backend, Local, AgentSandbox)
	}
}

// localOptions checks the local backend's flags and returns its options.
// Errors name the bad flag.
func (f *Flags) localOptions() (local.Options, error) {
	if f.memoryMB <= 0 {
		return local.Options{}, fmt.Errorf("--memory-mb=%d: must be positive", f.memoryMB)
	}
	if f.Local.Processes <= 0 {
		return local.Options{}, fmt.Errorf("--processes=%d: must be positive", f.Local.Processes)
	}
	if f.Local.CPUs < 0 {
		return local.Options{}, fmt.Errorf("--cpus=%d: must not be negative", f.Local.CPUs)
	}
	if f.Local.CPUWeight < 0 || f.Local.CPUWeight > local.MaxCPUWeight {
		return local.Options{}, fmt.Errorf("--cpu-weight=%d: want 1 to %d (1024: a process at nice 0), or 0 for this process's own", f.Local.CPUWeight, local.MaxCPUWeight)
	}
	if f.warmPool < 0 || f.warmPool > maxWarmPool {
		return local.Options{}, fmt.Errorf("--"+localWarmPoolFlag+"=%d: want 0 (off) to %d", f.warmPool, maxWarmPool)
	}
	if f.modMB <= 0 {
		return local.Options{}, fmt.Errorf("--module-download-mb=%d: must be positive", f.modMB)
	}
	if f.diskMB < 0 {
		return local.Options{}, fmt.Errorf("--disk-mb=%d: must not be negative (0: the default)", f.diskMB)
	}
	if f.budgetMB < 0 {
		return local.Options{}, fmt.Errorf("--memory-budget-mb=%d: must not be negative (0: the default)", f.budgetMB)
	}
	if f.fileMB <= 0 {
		return local.Options{}, fmt.Errorf("--file-size-mb=%d: must be positive", f.fileMB)
	}
	if f.snapMB < 0 {
		return local.Options{}, fmt.Errorf("--snapshot-mb=%d: must not be negative (0: the default)", f.snapMB)
	}
	if f.ownerMB < 0 {
		return local.Options{}, fmt.Errorf("--"+snapshotOwnerFlag+"=%d: must not be negative (0: the default, a quarter of --snapshot-mb)", f.ownerMB)
	}
	if f.Local.Connections < 0 {
		return local.Options{}, fmt.Errorf("--connections=%d: must not be negative (0: the default)", f.Local.Connections)
	}
	if f.Local.OpenFiles < 0 {
		return local.Options{}, fmt.Errorf("--open-files=%d: must not be negative (0: the default)", f.Local.OpenFiles)
	}
	if f.Local.DiskInodes <= 0 {
		return local.Options{}, fmt.Errorf("--disk-inodes=%d: must be positive", f.Local.DiskInodes)
	}
	relax, err := local.ParseRelax(f.relax)
	if err != nil {
		return local.Options{}, fmt.Errorf("--relax=%q: %w", f.relax, err)
	}
	opts := f.Local
	if f.modules != "" {
		opts.AllowModules = nil
		for _, p := range strings.Split(f.modules, ",") {
			opts.AllowModules = append(opts.AllowModules, strings.TrimSpace(p))
		}
		if err := modproxy.ValidatePatterns(opts.AllowModules); err != nil {
			return local.Options{}, fmt.Errorf("--allow-modules=%q: %w", f.modules, err)
		}
	}
	opts.MemoryBytes = f.memoryMB << 20
	opts.WarmPool = f.warmPool
	if f.warmPool == 0 {
		opts.WarmPool = -1 // local.Options: negative disables, 0 is the default
	}
	opts.DiskBytes = f.diskMB << 20
	opts.MemoryBudgetBytes = f.budgetMB << 20
	opts.ModuleDownloadBytes = f.modMB << 20
	opts.FileSizeBytes = f.fileMB << 20
	opts.SnapshotBytes = f.snapMB << 20
	opts.SnapshotBytesPerOwner = f.ownerMB << 20
	opts.Relax = relax
	return opts, nil
}

// Close ends what a backend keeps running between Opens (the local
// backend's warm pool of started sandboxes), when it keeps anything;
// sandboxes already opened are not touched. Front ends call it before
// exiting.
func Close(ctx context.Context, b goruntime.Backend) error {
	if c, ok := b.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}

// closeGrace is how long a front end on its way out waits for its
// backend to end what it keeps running.
const closeGrace = 30 * time.Second

// CloseOnExit is Close for a front end's deferred exit: it runs even when
// ctx is done (the signal that ends the front end), waits at most
// closeGrace, and logs a failure instead of returning it.
func CloseOnExit(ctx context.Context, b goruntime.Backend, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
	defer cancel()
	if err := Close(cctx, b); err != nil {
		log.Warn("close backend", "err", err)
	}
}
