package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
)

// installHint names the fix for a missing or unusable bubblewrap.
const installHint = "install it with scripts/install-deps.sh (Debian/Ubuntu: apt-get install bubblewrap)"

// serverBinaryFix is what gives a backend its runtime server binary.
const serverBinaryFix = "build cmd/sandbox-server and cmd/" + server.ProcessAPIName + " into this program's directory, or set Options.ServerPath (or call local.ServeIfChild first thing in main)"

// Backend opens sandboxes on this machine. It implements
// goruntime.Backend. Its methods are safe for concurrent use.
type Backend struct {
	opts      Options
	host      host   // what New found and fixed for every sandbox (host.go)
	sandboxes string // StateDir/sandboxes

	seeds   *seed.Builder // the seed build cache's builds (seedrun.go)
	handles handleStore   // the durable handles' records and reaper (handlestore.go)
	budget  budget        // admits sandboxes within the memory budget (budget.go)

	// Storage made ahead for Open (package spares), per seed: build
	// caches (sparecache.go) and disks (sparedisk.go).
	caches *cacheStore // spare build caches (sparecache.go)
	disks  *diskStore  // sandbox disks and their spares (sparedisk.go)

	bg *background // work that outlives its caller; Close ends it (background.go)
	// starts holds a slot per sandbox start under way (open.go,
	// startSlots): Opens beyond them wait their turn.
	starts chan struct{}
	pool   *warmPool // sandboxes started ahead for Open (pool.go)

	callDeadlines callDeadlines // file calls' deadlines when set (tests); deadline.go

	modules moduleProxies // Options.AllowModules (modules.go)

	// taskLimit stands for the kernel's task limit (checkTasks); 0: the
	// kernel's own. Tests set it.
	taskLimit int

	// users is this backend's shared hold on the state directory's
	// users.lock (users.go), released by Close (leave).
	users atomic.Pointer[os.File]
}

var _ goruntime.Backend = (*Backend)(nil)

// New checks that sandboxes can run here (bubblewrap present and able to
// create namespaces, a Go installation to bind) and returns the backend.
// It does not build the seed build cache; the first Open starts its build
// in the background, or Prepare builds it.
// Errors wrap goruntime.ErrUnavailable and name the fix.
func New(opts Options) (_ *Backend, retErr error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := &Backend{opts: o, bg: newBackground(), starts: make(chan struct{}, startSlots())}
	b.host.opts, b.host.modules = &b.opts, &b.modules
	unavailable := func(format string, args ...any) error {
		return fmt.Errorf("local backend: %s: %w", fmt.Sprintf(format, args...), goruntime.ErrUnavailable)
	}
	bw, err := exec.LookPath(o.BwrapPath)
	if err != nil {
		return nil, unavailable("bubblewrap (%s) not found: %s", o.BwrapPath, installHint)
	}
	b.host.bwrap = bw
	sb, err := findServerBinary(o)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	b.host.server, b.host.processAPI, b.host.childMode = sb.Path, sb.ProcessAPI, sb.ChildMode
	// go env (findGo) runs while the protections are checked: it fills
	// only the host's Go fields, which the checks do not read.
	goFound := inBackground(b.host.findGo)
	if err := b.host.setupProtections(); err != nil {
		goFound()
		return nil, unavailable("%v", err)
	}

	if o.StateDir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return nil, unavailable("no state directory: set Options.StateDir (%v)", err)
		}
		o.StateDir = d
	}
	b.opts.StateDir = o.StateDir
	b.sandboxes = stateDir(o.StateDir).sandboxes()
	b.caches, b.disks = newCacheStore(b.opts), newDiskStore(b.opts)
	if err := os.MkdirAll(b.sandboxes, 0o700); err != nil {
		return nil, unavailable("create state directory: %v", err)
	}
	// A unix socket path must fit in sun_path (108 bytes).
	if n := len(filepath.Join(b.sandboxes, "0123456789abcdef", "run", socketName)); n > 107 {
		return nil, unavailable("state directory %s is too deep for a unix socket path (%d bytes > 107): set Options.StateDir to a shorter path", o.StateDir, n)
	}

	users, err := lockUsers(o.StateDir)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	b.users.Store(users)
	defer func() {
		if retErr != nil {
			users.Close()
		}
	}()

	if err := goFound(); err != nil {
		return nil, unavailable("%v", err)
	}
	b.seeds = seed.NewBuilder(stateDir(o.StateDir).seedRoot(), b.host.goroot, b.host.seedEnv, b.bg.start, b.seedReady, o.Logger)
	if err := b.host.stageBinds(); err != nil {
		return nil, unavailable("%v", err)
	}
	if err := b.modules.setup(b.opts, b.host.goroot, b.host.modCache, b.host.hostProxy, b.host.hostSumDB); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	b.bg.start(b.prune)
	b.handles = handleStore{root: stateDir(o.StateDir).handles(), destroy: b.destroy, logger: o.Logger,
		alive: func(id string) bool { return sandboxRuns(b.sandboxes, id) }}
	b.bg.start(b.handles.runReaper)
	b.budget = budget{opts: b.opts, memoryDisk: b.host.memoryDisk, evict: func(ctx context.Context) bool { return b.pool.evict(ctx) }}
	b.pool = newWarmPool(b, o.WarmPool)
	b.pool.refill() // once the seed is complete: now, or when a build completes it (seedReady)
	return b, nil
}

// findGo fills goroot, modCache and the host's proxy settings.
func (h *host) findGo() error {
	goCmd := "go"
	if h.opts.GoRoot != "" {
		goCmd = filepath.Join(h.opts.GoRoot, "bin", "go")
	}
	goBin, err := exec.LookPath(goCmd)
	if err != nil {
		return fmt.Errorf("no Go installation: %v (put go on PATH or set Options.GoRoot)", err)
	}
	out, err := exec.Command(goBin, "env", "GOROOT", "GOMODCACHE", "GOPROXY", "GOSUMDB").Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 4 {
		return fmt.Errorf("go env: unexpected output %q", out)
	}
	h.goroot = lines[0]
	if h.opts.GoRoot != "" {
		h.goroot = h.opts.GoRoot
	}
	h.modCache = lines[1]
	if h.opts.ModCache != "" {
		h.modCache = h.opts.ModCache
	}
	h.hostProxy, h.hostSumDB = lines[2], lines[3]
	if h.hostProxy == "" || h.hostProxy == "off" {
		h.hostProxy = "https://proxy.golang.org,direct"
	}
	if h.hostSumDB == "" {
		h.hostSumDB = "sum.golang.org"
	}
	if _, err := os.Stat(h.modCache); err != nil {
		if err := os.MkdirAll(h.modCache, 0o755); err != nil {
			return fmt.Errorf("module cache %s: %v", h.modCache, err)
		}
	}
	return nil
}

// serverBinary is the runtime server a backend runs (see
// Options.ServerPath): Path, and next to it ProcessAPI, its process API
// companion; or, in ChildMode, this program re-executed (ServeIfChild),
// which serves the API itself. The server's binary is also each
// sandbox's gate (package gate).
type serverBinary struct {
	Path, ProcessAPI string
	ChildMode        bool
}

// findServerBinary resolves the runtime server binary of o.
func findServerBinary(o Options) (serverBinary, error) {
	var sb serverBinary
	p := o.ServerPath
	if p == "" {
		p = os.Getenv("GORUNTIME_SANDBOX_SERVER")
	}
	exe, exeErr := os.Executable()
	if p == "" && exeErr == nil {
		if cand := filepath.Join(filepath.Dir(exe), "sandbox-server"); isExecutable(cand) {
			p = cand
		}
	}
	if p == "" {
		if exeErr != nil {
			return sb, fmt.Errorf("no runtime server: set Options.ServerPath (%v)", exeErr)
		}
		p = exe
		sb.ChildMode = true
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return sb, err
	}
	given := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if !isExecutable(abs) {
		return sb, fmt.Errorf("runtime server %s is not an executable file (build cmd/sandbox-server or set Options.ServerPath)", abs)
	}
	sb.Path = abs
	if sb.ChildMode {
		return sb, nil
	}
	// The server starts its process API companion from next to its own
	// executable (bound at processAPIBin) on the first streaming command:
	// the one next to the path given, else next to the file it names.
	for _, dir := range []string{filepath.Dir(given), filepath.Dir(abs)} {
		if cand := filepath.Join(dir, server.ProcessAPIName); isExecutable(cand) {
			sb.ProcessAPI = cand
			if real, err := filepath.EvalSymlinks(cand); err == nil {
				sb.ProcessAPI = real
			}
			return sb, nil
		}
	}
	return sb, fmt.Errorf("runtime server %s has no process API companion: %s is not an executable file (build cmd/sandbox-server and cmd/%s into one directory)",
		given, filepath.Join(filepath.Dir(given), server.ProcessAPIName), server.ProcessAPIName)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// StateDir is where sandboxes and the seed cache live.
func (b *Backend) StateDir() string { return b.opts.StateDir }

// Open returns a new sandbox whose runtime server answers: one claimed
// from the warm pool (Options.WarmPool) when one is ready, else one it
// starts. It never waits for the seed build cache: before the seed is
// complete the sandbox starts with an empty build cache (its go command
// compiles what it needs, and keeps it), the seed's build runs in the
// background, and ctx's progress function (goruntime.WithProgress) is
// told so once. Errors wrap goruntime.ErrUnavailable when the machine
// cannot run it (cgroups not writable, bubblewrap failing).
func (b *Backend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	return b.openSandbox(ctx)
}

// Attach reconnects to a running sandbox by ID, from this or another
// process. Errors wrap goruntime.ErrSandboxNotFound when no sandbox with
// that ID is running, and goruntime.ErrSandboxGone when its processes run
// but its runtime server stopped answering (stopped by SIGSTOP, wedged):
// Attach then kills that sandbox and removes its directory. A durable
// handle's sandbox is not attached by ID (the error wraps
// goruntime.ErrSandboxNotFound): AttachHandle attaches it.
func (b *Backend) Attach(ctx context.Context, id string) (goruntime.Sandbox, error) {
	if b.handles.of(id) {
		// Attached by its ID, a handle's sandbox would skip what
		// AttachHandle does: the owner check, the lock that keeps
		// reapers off it and the renewal of its idle TTL.
		return nil, fmt.Errorf("local sandbox %s belongs to a sandbox handle: attach it through the handle (AttachHandle, an MCP sandbox_id): %w", id, goruntime.ErrSandboxNotFound)
	}
	return b.attach(ctx, id)
}

// List returns the IDs of the sandboxes in the state directory, running or
// not.
func (b *Backend) List() ([]string, error) {
	entries, err := os.ReadDir(b.sandboxes)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && sandboxid.Valid(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// tail returns at most the last n bytes of the log f, trimmed ("" when f
// is nil): only the end is read, since the sandbox's commands decide how
// long the server's log is.
func tail(f *os.File, n int) string {
	data := bytes.TrimSpace(readEnd(f, int64(n)+1))
	if len(data) > n {
		data = append([]byte("…"), data[len(data)-n:]...)
	}
	return string(data)
}

// readEnd reads at most the last n bytes of f (nil: none), leaving its
// offset alone.
func readEnd(f *os.File, n int64) []byte {
	if f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(fi.Size()-n, 0)
	data := make([]byte, fi.Size()-off)
	m, _ := f.ReadAt(data, off)
	return data[:m]
}
