package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// installHint names the fix for a missing or unusable bubblewrap.
const installHint = "install it with scripts/install-deps.sh (Debian/Ubuntu: apt-get install bubblewrap)"

// Backend opens sandboxes on this machine. It implements
// goruntime.Backend. Its methods are safe for concurrent use.
type Backend struct {
	opts      Options
	bwrap     string
	goroot    string
	modCache  string
	hostProxy string
	hostSumDB string
	server    string
	childMode bool // server is this program, re-executed (ServeIfChild)
	// processAPI is the server's process API companion
	// (server.ProcessAPIName next to server); empty in childMode, where
	// the re-executed program serves the API itself.
	processAPI string
	sandboxes  string

	seedMu    sync.Mutex
	seedDir   string
	seedBuild *seedBuild // the build in flight, or nil

	refilling      atomic.Bool // a spare-cache filler runs
	refillingDisks atomic.Bool // a spare-disk filler runs

	bg           *background // work that outlives its caller; Close ends it (background.go)
	pool         *warmPool   // sandboxes started ahead for Open (pool.go)
	extraStarted atomic.Bool // the extra seed build runs or ran (seedextra.go)

	callDeadlines callDeadlines // file calls' deadlines when set (tests); deadline.go

	// Protections (protect.go), fixed by New.
	layers       // seccomp filter and nested user namespace block
	hostUID bool // each sandbox runs as a host uid of its own (hostuid.go)
	// Where bubblewrap binds Go, the module cache and the server from:
	// their own paths, or stagings a sandbox uid can reach (stage.go).
	bindGoroot, bindModCache, bindServer, bindProcessAPI string
	diskQuota                                            bool // each sandbox gets a disk of its own (disk.go)

	modules moduleProxies // Options.AllowModules (modules.go)
}

var _ goruntime.Backend = (*Backend)(nil)

// New checks that sandboxes can run here (bubblewrap present and able to
// create namespaces, a Go installation to bind) and returns the backend.
// It does not build the seed build cache; the first Open does, or Prepare.
// Errors wrap goruntime.ErrUnavailable and name the fix.
func New(opts Options) (*Backend, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := &Backend{opts: o, bg: newBackground()}
	unavailable := func(format string, args ...any) error {
		return fmt.Errorf("local backend: %s: %w", fmt.Sprintf(format, args...), goruntime.ErrUnavailable)
	}
	bw, err := exec.LookPath(o.BwrapPath)
	if err != nil {
		return nil, unavailable("bubblewrap (%s) not found: %s", o.BwrapPath, installHint)
	}
	b.bwrap = bw
	if err := b.setupProtections(); err != nil {
		return nil, unavailable("%v", err)
	}
	if out, err := trialSandbox(context.Background(), b.bwrap, b.layers, b.trialUID()); err != nil {
		return nil, unavailable("%s", b.diagnoseTrial(context.Background(), out, err))
	}

	if o.StateDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, unavailable("no state directory: set Options.StateDir (%v)", err)
		}
		o.StateDir = filepath.Join(cache, "go-runtime-sandbox")
	}
	b.opts.StateDir = o.StateDir
	b.sandboxes = stateDir(o.StateDir).sandboxes()
	if err := os.MkdirAll(b.sandboxes, 0o700); err != nil {
		return nil, unavailable("create state directory: %v", err)
	}
	// A unix socket path must fit in sun_path (108 bytes).
	if n := len(filepath.Join(b.sandboxes, "0123456789abcdef", "run", socketName)); n > 107 {
		return nil, unavailable("state directory %s is too deep for a unix socket path (%d bytes > 107): set Options.StateDir to a shorter path", o.StateDir, n)
	}

	if err := b.findGo(); err != nil {
		return nil, unavailable("%v", err)
	}
	if err := b.findServer(); err != nil {
		return nil, unavailable("%v", err)
	}
	if err := b.stageBinds(); err != nil {
		return nil, unavailable("%v", err)
	}
	if err := b.setupModuleProxy(); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	b.bg.start(b.prune)
	b.pool = newWarmPool(b, o.WarmPool)
	if b.seedReady() {
		b.pool.refill() // else the first Open or Prepare fills it
	}
	return b, nil
}

// findGo fills goroot, modCache and the host's proxy settings.
func (b *Backend) findGo() error {
	goCmd := "go"
	if b.opts.GoRoot != "" {
		goCmd = filepath.Join(b.opts.GoRoot, "bin", "go")
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
	b.goroot = lines[0]
	if b.opts.GoRoot != "" {
		b.goroot = b.opts.GoRoot
	}
	b.modCache = lines[1]
	if b.opts.ModCache != "" {
		b.modCache = b.opts.ModCache
	}
	b.hostProxy, b.hostSumDB = lines[2], lines[3]
	if b.hostProxy == "" || b.hostProxy == "off" {
		b.hostProxy = "https://proxy.golang.org,direct"
	}
	if b.hostSumDB == "" {
		b.hostSumDB = "sum.golang.org"
	}
	if _, err := os.Stat(b.modCache); err != nil {
		if err := os.MkdirAll(b.modCache, 0o755); err != nil {
			return fmt.Errorf("module cache %s: %v", b.modCache, err)
		}
	}
	return nil
}

// findServer resolves the runtime server binary (see Options.ServerPath).
func (b *Backend) findServer() error {
	p := b.opts.ServerPath
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
			return fmt.Errorf("no runtime server: set Options.ServerPath (%v)", exeErr)
		}
		p = exe
		b.childMode = true
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	given := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if !isExecutable(abs) {
		return fmt.Errorf("runtime server %s is not an executable file (build cmd/sandbox-server or set Options.ServerPath)", abs)
	}
	b.server = abs
	if b.childMode {
		return nil
	}
	// The server starts its process API companion from next to its own
	// executable (bound at processAPIBin) on the first streaming command:
	// the one next to the path given, else next to the file it names.
	for _, dir := range []string{filepath.Dir(given), filepath.Dir(abs)} {
		if cand := filepath.Join(dir, server.ProcessAPIName); isExecutable(cand) {
			b.processAPI = cand
			if real, err := filepath.EvalSymlinks(cand); err == nil {
				b.processAPI = real
			}
			return nil
		}
	}
	return fmt.Errorf("runtime server %s has no process API companion: %s is not an executable file (build cmd/sandbox-server and cmd/%s into one directory)",
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

// Prepare builds the seed build cache if this machine has none for this Go
// installation yet (once, 1-3 minutes on 2 cores), so that later Opens
// are fast. Open calls it too. See seed for what happens when ctx ends
// first.
func (b *Backend) Prepare(ctx context.Context) error {
	_, err := b.seed(ctx)
	if err == nil {
		b.pool.refill()
	}
	return err
}

// seedReady reports whether this machine has a complete seed build cache
// for this Go installation, without building one.
func (b *Backend) seedReady() bool {
	key, err := seedKey(b.goroot)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(stateDir(b.opts.StateDir).seed(key), ".complete"))
	return err == nil
}

// seedBuildTimeout bounds one seed build. It is not tied to any caller:
// a build outlives the Open or Prepare that started it, so a caller's
// short timeout never throws the work away.
const seedBuildTimeout = 20 * time.Minute

// seedBuild is one seed build in flight, shared by every caller of seed.
type seedBuild struct {
	start time.Time
	done  chan struct{} // closed when dir and err are set
	dir   string
	err   error

	mu      sync.Mutex
	last    goruntime.Progress // the latest report
	changed chan struct{}      // closed and replaced at every report
}

// report records p as the build's latest progress and wakes the waiters.
func (r *seedBuild) report(p goruntime.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Elapsed = time.Since(r.start)
	r.last = p
	close(r.changed)
	r.changed = make(chan struct{})
}

// latest returns the latest report and a channel closed at the next one.
func (r *seedBuild) latest() (goruntime.Progress, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.changed
}

// progressEvery is how often a caller waiting for the seed build gets a
// progress report when nothing else changed (the elapsed time does).
const progressEvery = 2 * time.Second

// seed returns the seed build cache's directory. The build (or the wait
// for another process's build, under the seed's lock file) runs once per
// Backend in the background, bounded by seedBuildTimeout; callers wait for
// it with their ctx. When ctx ends first, the error says the cache is
// still being built and wraps ctx.Err(); the build goes on, and the next
// call reuses it. A failed build is retried by the next call.
func (b *Backend) seed(ctx context.Context) (string, error) {
	b.seedMu.Lock()
	if b.seedDir != "" {
		if _, err := os.Stat(filepath.Join(b.seedDir, ".complete")); err == nil {
			b.seedMu.Unlock()
			b.buildExtraSeed(b.seedDir)
			return b.seedDir, nil
		}
	}
	run := b.seedBuild
	if run == nil {
		run = &seedBuild{start: time.Now(), done: make(chan struct{}), changed: make(chan struct{}),
			last: goruntime.Progress{Stage: seedStage, Message: "starting (once per machine and Go installation)"}}
		b.seedBuild = run
		if !b.bg.start(func(bgCtx context.Context) { b.runSeedBuild(bgCtx, run) }) {
			// After Close: build in this call, bounded by its ctx.
			b.seedMu.Unlock()
			b.runSeedBuild(ctx, run)
			b.seedMu.Lock()
		}
	}
	b.seedMu.Unlock()
	if err := run.wait(ctx); err != nil {
		return "", fmt.Errorf("local backend: the seed Go build cache is still being built (%s so far; once per machine and Go installation, 1-3 minutes on 2 cores); "+
			"the build continues in the background and the next Open will reuse it: raise the open timeout (--open-timeout for mcp-server), "+
			"or call Backend.Prepare at startup: %w", time.Since(run.start).Round(time.Second), err)
	}
	if run.err == nil {
		b.buildExtraSeed(run.dir)
	}
	return run.dir, run.err
}

// wait blocks until the build is done or ctx ends (returning ctx.Err()),
// sending its progress to ctx's progress function (goruntime.WithProgress)
// when it has one: at once, at every new step, at most once a second for
// packages compiled, and every progressEvery when nothing changed.
func (r *seedBuild) wait(ctx context.Context) error {
	if !goruntime.HasProgress(ctx) {
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	// A report without a step (the build starting, or waiting for another
	// process's build) waits for the first tick: a seed that exists is
	// found before anything is said. Steps are reported at once.
	var sent goruntime.Progress
	if p, _ := r.latest(); p.Step == 0 {
		sent = p
	}
	sentAt := time.Now()
	for {
		p, changed := r.latest()
		if p.Step != sent.Step || p.Message != sent.Message || time.Since(sentAt) >= time.Second {
			p.Elapsed = time.Since(r.start)
			goruntime.ReportProgress(ctx, p)
			sent, sentAt = p, time.Now()
		}
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-tick.C:
		}
	}
}

func (b *Backend) runSeedBuild(ctx context.Context, run *seedBuild) {
	ctx, cancel := context.WithTimeout(ctx, seedBuildTimeout)
	defer cancel()
	dir, err := ensureSeed(ctx, b.opts.StateDir, b.goroot, b.seedEnv(), run.report)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (gave up after %s)", err, seedBuildTimeout)
	}
	b.seedMu.Lock()
	run.dir, run.err = dir, err
	if err == nil {
		b.seedDir = dir
	}
	b.seedBuild = nil
	b.seedMu.Unlock()
	close(run.done)
}

// Open returns a new sandbox whose runtime server answers: one claimed
// from the warm pool (Options.WarmPool) when one is ready, else one it
// starts. Errors wrap goruntime.ErrUnavailable when the machine cannot run
// it (cgroups not writable, bubblewrap failing).
func (b *Backend) Open(ctx context.Context) (goruntime.Sandbox, error) {
	return b.openSandbox(ctx)
}

// Attach reconnects to a running sandbox by ID, from this or another
// process. Errors wrap goruntime.ErrSandboxNotFound when no sandbox with
// that ID is running, and goruntime.ErrSandboxGone when its processes run
// but its runtime server stopped answering (stopped by SIGSTOP, wedged):
// Attach then kills that sandbox and removes its directory.
func (b *Backend) Attach(ctx context.Context, id string) (goruntime.Sandbox, error) {
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
		if e.IsDir() && validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validID reports whether id has the shape newID makes, so that it can
// name a directory safely.
func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Only the end is read: the sandbox's commands decide how long the
	// server's log is.
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(n)+1 {
		_, _ = f.Seek(fi.Size()-int64(n)-1, io.SeekStart)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(n)+1))
	if err != nil {
		return ""
	}
	data = bytes.TrimSpace(data)
	if len(data) > n {
		data = append([]byte("…"), data[len(data)-n:]...)
	}
	return string(data)
}
