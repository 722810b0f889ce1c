package local

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/modproxy"
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
	// ServeIfChild first thing. A sandbox-server needs its process API
	// companion, sandbox-processapi (cmd/sandbox-processapi), in the same
	// directory (of the path given, or of the file a symlink names); New
	// fails without it. A re-executed program serves the API itself.
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

	// AllowModules lists module path patterns (as GOPRIVATE takes them:
	// a path.Match glob per element, matching a path and everything under
	// it, e.g. "github.com/foo/*" or "golang.org/x/text") that sandboxes
	// without a network may download through a module proxy this backend
	// runs on the host: it fetches them with the host's go command and
	// network into ModCache, and each sandbox reaches it through a unix
	// socket in its own directory and a loopback relay in its own network
	// namespace (docs/go-aware.md, "Modules on demand"). Modules outside
	// the list are refused with an error naming the pattern to add. Empty
	// (the default): no proxy, modules only from ModCache. Not allowed
	// with Network, which gives sandboxes the host's GOPROXY itself.
	AllowModules []string

	// ModuleDownloadBytes bounds what the module proxy (AllowModules)
	// adds to ModCache over the backend's life; past it, versions not yet
	// in the cache are refused. Default modproxy.DefaultMaxDownloadBytes.
	ModuleDownloadBytes int64

	// MemoryBytes caps the memory (RAM+swap) of all processes in a
	// sandbox; the kernel OOM-kills past it. Default 1 GiB, at least
	// MinMemoryBytes. GOMEMLIMIT is set to 90% of it. A backend that is
	// not root keeps the disk in memory (DiskBytes): the sandbox's memory
	// cgroup then holds MemoryBytes+DiskBytes, for its processes and the
	// files on its disk together.
	MemoryBytes int64

	// Processes caps the tasks (processes and threads) a sandbox's
	// commands have alive at once. The sandbox's own tasks (bubblewrap,
	// the runtime server and the threads it reserves) come on top: the
	// cgroup's pids.max is Processes + OwnTasks. Default 512, at least
	// MinProcesses.
	Processes int

	// CPUs caps the CPU time a sandbox gets per wall-clock second, in
	// CPUs, and sets GOMAXPROCS. Default runtime.NumCPU(), which is also
	// the most it may be: New rejects more CPUs than the machine has.
	CPUs int

	// CPUWeight is the CPU weight of all sandboxes together against the
	// other processes of the caller's cgroup when the CPUs are contended,
	// in the kernel's weight of a task (1024: a process at nice 0, 110:
	// nice 10, 15: nice 19; cgroup v1 cpu.shares, scaled to cpu.weight
	// on v2), at most MaxCPUWeight. Default 0: the weight of the
	// calling process itself, from its nice value (and its session's
	// autogroup's, where that gives less), read at each sandbox start,
	// so sandboxes never outrank the processes of the user who started
	// them. Every backend of the caller's cgroup shares the one group:
	// the latest sandbox start sets it. On cgroup v1 a user other than
	// root cannot set it: root's one-time setup weighs the user's group
	// as one process at nice 0.
	CPUWeight int

	// FileSizeBytes caps the size of any single file a sandbox writes
	// (RLIMIT_FSIZE); a write past it fails with EFBIG ("file too large").
	// Default 1 GiB.
	FileSizeBytes int64

	// OpenFiles caps the files each process of a sandbox may have open at
	// once (RLIMIT_NOFILE, soft and hard); an open past it fails with
	// EMFILE ("too many open files"). With the task limit it bounds what
	// one sandbox can take of the host's open-file table (fs.file-max,
	// shared by every process on the host): (Processes + OwnTasks) *
	// OpenFiles. Default: DefaultOpenFiles, lowered on hosts with a small
	// table so that bound stays within 1/16 of fs.file-max
	// (defaultOpenFiles), but never below MinOpenFiles.
	OpenFiles int

	// Connections caps the TCP connections open at once in a sandbox's
	// own network (one per connection, whichever end is inside); a
	// connect past it fails with ECONNREFUSED. Connections waiting to be
	// accepted are charged to no cgroup, so without a cap one sandbox
	// can fill the host's kernel memory with them (netns.go). Not
	// applied with Network. Default DefaultConnections.
	Connections int

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
	// answer. Default 1 min: a start takes a fraction of a second on an
	// idle host, but over 15 s was seen where every CPU ran four busy
	// processes beside it, and a busy host should make calls slower,
	// not fail. At most 2 x CPUs + 2 sandboxes start at once;
	// an Open past them waits its turn first (bounded by its context,
	// not by StartTimeout).
	StartTimeout time.Duration

	// DiskBytes caps the bytes a sandbox's writable storage holds: /app,
	// HOME (with the Go build and module caches) and /tmp share one
	// file system of this size of its own: as root a sparse ext4 image
	// (its own metadata takes about 2% of it), otherwise a tmpfs in the
	// sandbox's own mount namespace, held in memory (see MemoryBytes).
	// A write past it fails with ENOSPC and the command's result has
	// Limit LimitDisk. Default DefaultDiskBytes (4 GiB) for an ext4
	// image; DefaultMemoryDiskBytes (1 GiB) for a disk in memory, which
	// the sandbox's processes may use while the disk is empty
	// (MemoryBudgetBytes). At least MinDiskBytes. See Relax.DiskQuota.
	DiskBytes int64

	// MemoryBudgetBytes bounds what all the sandboxes of this user, in
	// every process and state directory, are promised together when
	// their disks are in memory (a backend that is not root): each is
	// promised its cgroup's memory limit, MemoryBytes+DiskBytes, and an
	// Open that would take the promises past the budget is refused with
	// an error wrapping ErrHostLimit, so that they can never together
	// take more of the host's memory than this. A sandbox waiting in the
	// warm pool is promised 64 MiB until it is claimed, and an Open that
	// does not fit ends this backend's pool sandboxes before it gives
	// up. Default: half the host's memory (MemTotal). Not applied as
	// root, whose sandboxes' disks are ext4 images.
	MemoryBudgetBytes int64

	// SnapshotBytes caps what all the snapshots of the state directory
	// hold together, on the host's disk (StateDir/snapshots): a snapshot
	// that would take them past it fails with an error wrapping
	// goruntime.ErrSnapshotQuota. Default DefaultSnapshotBytes (4 GiB).
	SnapshotBytes int64

	// SnapshotBytesPerOwner caps what one owner's snapshots (and the
	// snapshots its live forks are layered on) hold of SnapshotBytes, so
	// that one principal cannot fill the store for all: past it a
	// snapshot or a fork fails with an error wrapping
	// goruntime.ErrSnapshotQuota. Default a quarter of SnapshotBytes; at
	// most SnapshotBytes.
	SnapshotBytesPerOwner int64

	// DiskInodes caps the files, directories and links a sandbox's
	// writable storage holds (the ext4 image's inode count, rounded up
	// to a whole block group; the tmpfs's nr_inodes). Default 200000, at
	// least MinDiskInodes.
	DiskInodes int64

	// HostUIDBase and HostUIDCount are the range of host uids (each used
	// as the gid too) that sandboxes run as when the backend runs as
	// root: every live sandbox gets one of its own, never host uid 0, and
	// its files on the host belong to it. Defaults DefaultHostUIDBase and
	// DefaultHostUIDCount; the range must not hold real users. A backend
	// that is not root runs sandboxes as its own uid.
	HostUIDBase, HostUIDCount int

	// Relax lists protections New and Open may do without on a host that
	// cannot provide them. By default each is required: when one is
	// unavailable New or Open fails with an error wrapping
	// goruntime.ErrUnavailable that names the fix. Every relaxed
	// protection is logged (warning) by New.
	Relax Relax

	// Logger receives debug logs; nil means slog.Default().
	Logger *slog.Logger
}

// Relax names protections that may be left out; see Options.Relax and
// docs/local-backend.md ("Protections").
type Relax struct {
	// Seccomp runs sandboxes without the system call filter.
	Seccomp bool
	// NestedUserns lets sandboxes create user namespaces of their own
	// (bubblewrap's --disable-userns is not used; the seccomp filter
	// still refuses them unless Seccomp is relaxed too).
	NestedUserns bool
	// HostUID runs sandboxes as the caller's uid (host root when the
	// caller is root) instead of a uid of their own.
	HostUID bool
	// DiskQuota gives sandboxes plain directories on the state
	// directory's file system, with no byte or inode cap (only
	// FileSizeBytes per file).
	DiskQuota bool
	// FileTable runs sandboxes on a host whose open-file table
	// (fs.file-max) one sandbox could fill by itself (fileTableProblem).
	FileTable bool
	// Connections runs sandboxes without the cap on their TCP
	// connections (Options.Connections), where the kernel lacks
	// nftables' connlimit.
	Connections bool
}

// Defaults, see Options.
const (
	DefaultMemoryBytes   = 1 << 30
	DefaultProcesses     = 512
	DefaultFileSizeBytes = 1 << 30
	DefaultOpenFiles     = 1024
	DefaultConnections   = 4096
	DefaultOutputBytes   = 8 << 20
	DefaultExecTimeout   = 300 * time.Second
	DefaultStartTimeout  = time.Minute
	DefaultWarmPool      = 2
	DefaultDiskBytes     = 4 << 30
	// DefaultMemoryDiskBytes is DiskBytes's default for a disk in memory
	// (a backend that is not root): with the default MemoryBytes a
	// sandbox is promised 2 GiB, and the default MemoryBudgetBytes, half
	// the host's memory, holds 5 of them on a 24 GiB host (2 with a
	// 4 GiB disk).
	DefaultMemoryDiskBytes = 1 << 30
	DefaultDiskInodes      = 200_000
	// DefaultSnapshotBytes is SnapshotBytes's default.
	DefaultSnapshotBytes = 4 << 30

	// DefaultHostUIDBase and DefaultHostUIDCount: host uids
	// 1950000000-1950004095, above the ranges /etc/subuid and systemd
	// hand out (systemd's container range ends at 1879048191) and below
	// 2^31.
	DefaultHostUIDBase  = 1_950_000_000
	DefaultHostUIDCount = 4096

	// MinDiskBytes and MinDiskInodes are the smallest disk quota New
	// accepts: a sandbox's own directories and the Go build cache's
	// directories (about 300 inodes) must fit with room for a program.
	MinDiskBytes  = 32 << 20
	MinDiskInodes = 2048

	// inodeBytes is the size of one ext4 inode: a disk's inode tables
	// take DiskInodes*inodeBytes of DiskBytes.
	inodeBytes = 256

	// MinMemoryBytes is the smallest MemoryBytes New accepts: the runtime
	// server (~13 MB resident), the sandbox's shells and a command's first
	// process must fit, with room left for the command; below it a sandbox
	// cannot start its server.
	MinMemoryBytes = 64 << 20
	// MinProcesses is the smallest Processes New accepts: a shell and a
	// small Go program (the go command alone runs about a dozen threads)
	// need that many.
	MinProcesses = 16
	// MinOpenFiles is the smallest OpenFiles New accepts and the floor
	// of the default: the go command, a compiler and a linker running at
	// once need about a hundred.
	MinOpenFiles = 256
	// MinConnections is the smallest Connections New accepts: a test's
	// HTTP client and server hold a few dozen at once.
	MinConnections = 64
	// MaxCPUWeight is the largest CPUWeight New accepts: cgroup v1's
	// largest cpu.shares (262144, 256 processes at nice 0).
	MaxCPUWeight = cgroups.MaxWeight
	// OwnTasks is the sandbox's own tasks, which Processes does not
	// count: the runtime server's threads (serverOSThreads it starts up
	// front, the Go runtime's sysmon, template and signal threads),
	// bubblewrap (outside the sandbox's pid namespace; the server is its
	// PID 1), with a few to spare. The pids cgroup allows Processes + OwnTasks.
	OwnTasks = serverOSThreads + 12
)

// serverOSThreads is the runtime server's --os-threads in a local
// sandbox: the OS threads it starts before it listens and keeps
// (internal/server/threads.go), so that a command filling the task limit
// cannot stop it from getting one (the Go runtime aborts when it cannot
// start a thread it needs).
const serverOSThreads = 16

// validate rejects limits a sandbox cannot work under, naming the option
// (and the flag of internal/frontend/backendflag that sets it).
func (o Options) validate() error {
	switch {
	case o.MemoryBytes < MinMemoryBytes:
		return fmt.Errorf("local backend: memory limit %d bytes (Options.MemoryBytes, %d MiB) is below the minimum of %d MiB: "+
			"the runtime server and the sandbox's shells need about that much before any command runs",
			o.MemoryBytes, o.MemoryBytes>>20, MinMemoryBytes>>20)
	case o.Processes < MinProcesses:
		return fmt.Errorf("local backend: process limit %d (Options.Processes) is below the minimum of %d: "+
			"a shell and a small Go program need about that many tasks (processes and threads)", o.Processes, MinProcesses)
	case o.OpenFiles < MinOpenFiles:
		return fmt.Errorf("local backend: open-file limit %d (Options.OpenFiles) is below the minimum of %d: "+
			"the go command, the compiler and the linker need about that many at once", o.OpenFiles, MinOpenFiles)
	case o.Connections < MinConnections:
		return fmt.Errorf("local backend: connection limit %d (Options.Connections) is below the minimum of %d: "+
			"a test's HTTP client and server hold a few dozen at once", o.Connections, MinConnections)
	case o.DiskBytes < MinDiskBytes:
		return fmt.Errorf("local backend: disk quota %d bytes (Options.DiskBytes, %d MiB) is below the minimum of %d MiB", o.DiskBytes, o.DiskBytes>>20, MinDiskBytes>>20)
	case o.DiskInodes < MinDiskInodes:
		return fmt.Errorf("local backend: inode quota %d (Options.DiskInodes) is below the minimum of %d: a sandbox's own directories and the Go build cache's take about 300",
			o.DiskInodes, MinDiskInodes)
	case o.DiskInodes*inodeBytes > o.DiskBytes/8:
		return fmt.Errorf("local backend: inode quota %d (Options.DiskInodes) needs %d MiB of inode tables, more than an eighth of the %d MiB disk quota (Options.DiskBytes): lower the inode quota to at most %d or raise the disk quota",
			o.DiskInodes, o.DiskInodes*inodeBytes>>20, o.DiskBytes>>20, o.DiskBytes/8/inodeBytes)
	case o.HostUIDBase <= 0 || o.HostUIDCount <= 0 || int64(o.HostUIDBase)+int64(o.HostUIDCount) > 1<<31:
		return fmt.Errorf("local backend: host uid range %d+%d (Options.HostUIDBase, HostUIDCount) must be positive and end below 2^31", o.HostUIDBase, o.HostUIDCount)
	case len(o.AllowModules) > 0 && o.Network:
		return fmt.Errorf("local backend: a module allowlist (Options.AllowModules) is for sandboxes without a network; " +
			"with Options.Network they reach the host's GOPROXY themselves: drop one of the two")
	case modproxy.ValidatePatterns(o.AllowModules) != nil:
		return fmt.Errorf("local backend: Options.AllowModules: %w", modproxy.ValidatePatterns(o.AllowModules))
	case o.CPUWeight < 0 || o.CPUWeight > MaxCPUWeight:
		return fmt.Errorf("local backend: CPU weight %d (Options.CPUWeight) must be between 1 and %d (1024: a process at nice 0), or 0 for the caller's own",
			o.CPUWeight, MaxCPUWeight)
	case o.CPUs > runtime.NumCPU():
		return fmt.Errorf("local backend: CPU limit %d (Options.CPUs) is more than the %d CPUs of this machine: "+
			"set at most %d, or 0 for all", o.CPUs, runtime.NumCPU(), runtime.NumCPU())
	}
	return o.budgetProblem(o.usesMemoryDisk())
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
	if o.OpenFiles == 0 {
		o.OpenFiles = defaultOpenFiles(hostFileMax(), o.Processes+OwnTasks)
	}
	if o.Connections == 0 {
		o.Connections = DefaultConnections
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
	if o.DiskBytes <= 0 {
		o.DiskBytes = DefaultDiskBytes
		if o.usesMemoryDisk() {
			o.DiskBytes = DefaultMemoryDiskBytes
		}
	}
	if o.MemoryBudgetBytes <= 0 && o.usesMemoryDisk() {
		o.MemoryBudgetBytes = defaultMemoryBudget(hostMemTotal())
	}
	if o.DiskInodes <= 0 {
		o.DiskInodes = DefaultDiskInodes
	}
	if o.SnapshotBytes <= 0 {
		o.SnapshotBytes = DefaultSnapshotBytes
	}
	if o.SnapshotBytesPerOwner <= 0 {
		o.SnapshotBytesPerOwner = o.SnapshotBytes / 4
	}
	o.SnapshotBytesPerOwner = min(o.SnapshotBytesPerOwner, o.SnapshotBytes)
	if o.HostUIDBase == 0 {
		o.HostUIDBase = DefaultHostUIDBase
	}
	if o.HostUIDCount == 0 {
		o.HostUIDCount = DefaultHostUIDCount
	}
	if o.BwrapPath == "" {
		o.BwrapPath = "bwrap"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
