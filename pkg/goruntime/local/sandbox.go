package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// meta is a sandbox's sandbox.json: what another process needs to attach
// to it and to tear it down.
type meta struct {
	ID        string    `json:"id"`
	PID       int       `json:"pid"`        // bubblewrap's pid on the host
	StartTime uint64    `json:"start_time"` // its start time in clock ticks, against pid reuse
	Keep      []int     `json:"keep"`       // bubblewrap, its init, the lifeline shell, the server
	Server    int       `json:"server_pid"` // the runtime server's pid on the host (0: unknown, older sandboxes)
	ServerAt  uint64    `json:"server_start"`
	Cgroup    cgroup    `json:"cgroup"`
	Created   time.Time `json:"created"`
	Network   bool      `json:"network"`
}

// Sandbox is one local sandbox. It implements goruntime.Sandbox; its
// methods are safe for concurrent use.
type Sandbox struct {
	b    *Backend
	l    layout
	meta meta
	cl   *client
	keep map[int]bool

	mu       sync.Mutex
	done     bool     // closed or disconnected
	gone     error    // set once the sandbox was found dead; wraps ErrSandboxGone
	lifeline *os.File // write end of the lifeline pipe; nil after Attach
	exited   chan struct{}

	proc processConn // gRPC connection for ExecStream
}

var _ goruntime.Sandbox = (*Sandbox)(nil)

func (b *Backend) open(ctx context.Context) (_ *Sandbox, err error) {
	seed, err := b.seed(ctx)
	if err != nil {
		return nil, err
	}
	id := newID()
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	defer func() {
		if err != nil {
			_ = removeTree(l.dir)
		}
	}()
	for _, d := range []string{l.app(), filepath.Dir(l.gocache()), l.tmp(), l.run(), l.etc()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	if err := writeEtc(l); err != nil {
		return nil, fmt.Errorf("write sandbox /etc files: %w", err)
	}
	if !b.claimSpare(seed, l.gocache()) {
		if err := populateCache(seed, l.gocache()); err != nil {
			return nil, err
		}
	}
	defer b.refillSpares(seed)
	cg, err := newCgroup(id, cgroupLimits{MemoryBytes: b.opts.MemoryBytes, Processes: b.opts.Processes, CPUs: b.opts.CPUs})
	if err != nil {
		return nil, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
	}
	defer func() {
		if err != nil {
			_ = cg.remove()
		}
	}()

	logf, err := os.OpenFile(l.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer lifeR.Close()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		lifeW.Close()
		return nil, err
	}
	defer gateR.Close()
	defer gateW.Close()

	args := append([]string{"-c", gateScript, "sandbox-gate", b.bwrap}, b.bwrapArgs(l)...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{lifeR, gateR} // fds 3 and 4
	// Own session: the terminal's signals (Ctrl-C) reach the sandbox only
	// through the lifeline, so Disconnect can leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("start bubblewrap: %w: %w", err, goruntime.ErrUnavailable)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pid := cmd.Process.Pid
	fail := func(e error) (*Sandbox, error) {
		lifeW.Close()
		_ = cmd.Process.Kill()
		<-exited
		return nil, e
	}
	if err := cg.add(pid); err != nil {
		return fail(fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable))
	}
	fsize := uint64(b.opts.FileSizeBytes)
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: fsize, Max: fsize}, nil); err != nil {
		return fail(fmt.Errorf("set file size limit: %w", err))
	}
	if _, err := gateW.Write([]byte("go\n")); err != nil {
		return fail(fmt.Errorf("release bubblewrap: %w", err))
	}

	s := &Sandbox{b: b, l: l, cl: newClient(l.socket()), lifeline: lifeW, exited: exited}
	if err := s.waitReady(ctx, exited); err != nil {
		s.cl.close()
		return fail(err)
	}
	st, _ := procfs.ReadStat(pid)
	s.meta = meta{ID: id, PID: pid, StartTime: st.StartTime, Cgroup: *cg, Created: time.Now().UTC(), Network: b.opts.Network}
	if procs, err := cg.procs(); err == nil {
		s.meta.Keep = procs
	}
	s.keep = keepSet(s.meta.Keep)
	s.meta.Server = findServer(s.meta.Keep)
	if st, err := procfs.ReadStat(s.meta.Server); err == nil {
		s.meta.ServerAt = st.StartTime
	}
	protectFromOOM(s.meta.Keep)
	if err := writeJSON(l.meta(), s.meta); err != nil {
		s.cl.close()
		return fail(fmt.Errorf("write sandbox state: %w", err))
	}
	b.opts.Logger.DebugContext(ctx, "local sandbox open", "id", id, "pid", pid)
	return s, nil
}

// waitReady polls the server until it answers, bubblewrap exits, or the
// start timeout passes.
func (s *Sandbox) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, s.b.opts.StartTimeout)
	defer cancel()
	delay := time.Millisecond
	for {
		if _, err := os.Stat(s.l.socket()); err == nil {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			err := s.cl.ready(rctx)
			rcancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			hint := ""
			if s.b.childMode {
				hint = fmt.Sprintf(" (the server is this program, %s, re-executed: its main must call local.ServeIfChild() first thing, or set Options.ServerPath / $GORUNTIME_SANDBOX_SERVER to a sandbox-server binary)", s.b.server)
			}
			return fmt.Errorf("local backend: sandbox exited before its runtime server answered%s; log: %s: %w",
				hint, tail(s.l.log(), 1500), goruntime.ErrUnavailable)
		case <-ctx.Done():
			hint := ""
			if s.b.childMode {
				hint = " (is local.ServeIfChild() the first call in main?)"
			}
			return fmt.Errorf("local backend: runtime server did not answer within %v%s; log: %s: %w",
				s.b.opts.StartTimeout, hint, tail(s.l.log(), 1500), ctx.Err())
		case <-time.After(delay):
		}
		if delay < 10*time.Millisecond {
			delay += time.Millisecond
		}
	}
}

func (b *Backend) attach(ctx context.Context, id string) (*Sandbox, error) {
	if !validID(id) {
		return nil, fmt.Errorf("local sandbox %q: not a sandbox ID: %w", id, goruntime.ErrSandboxNotFound)
	}
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	var m meta
	data, err := os.ReadFile(l.meta())
	if err != nil {
		return nil, fmt.Errorf("local sandbox %s: %w", id, goruntime.ErrSandboxNotFound)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("local sandbox %s: bad state file: %v: %w", id, err, goruntime.ErrSandboxNotFound)
	}
	if !procfs.Alive(m.PID, m.StartTime) {
		return nil, fmt.Errorf("local sandbox %s: %w (its process has exited)", id, goruntime.ErrSandboxNotFound)
	}
	if m.Server == 0 {
		m.Server = findServer(m.Keep)
		if st, err := procfs.ReadStat(m.Server); err == nil {
			m.ServerAt = st.StartTime
		}
	}
	s := &Sandbox{b: b, l: l, meta: m, cl: newClient(l.socket()), keep: keepSet(m.Keep)}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.cl.ready(rctx); err != nil {
		if ctx.Err() != nil {
			s.cl.close()
			return nil, fmt.Errorf("attach local sandbox %s: %w", id, ctx.Err())
		}
		return s.attachFailed(ctx, err)
	}
	return s, nil
}

// attachFailed handles a sandbox whose processes are alive but whose
// runtime server did not answer Attach's readiness check (err): one a
// command stopped (SIGSTOP) or wedged would otherwise run until the
// machine reboots, since prune removes only dead sandboxes. When the
// server is stopped, has exited, or does not answer a second probe either
// (diagnose), the sandbox is killed (its cgroup) and its directory
// removed, and the error wraps goruntime.ErrSandboxGone. A server that
// answers the second probe was only slow: s is returned.
func (s *Sandbox) attachFailed(ctx context.Context, err error) (*Sandbox, error) {
	var cause error
	if s.serverState() == "stopped" {
		cause = errServerWedged
	}
	gone := s.diagnose(ctx, cause, err)
	if gone == nil {
		return s, nil
	}
	if cerr := s.Close(context.WithoutCancel(ctx)); cerr != nil {
		s.b.opts.Logger.Warn("local sandbox: remove after the server stopped answering", "id", s.meta.ID, "err", cerr)
	}
	return nil, fmt.Errorf("attach local sandbox %s: %w", s.meta.ID, gone)
}

// ID names the sandbox for Backend.Attach: the name of its state directory.
func (s *Sandbox) ID() string { return s.meta.ID }

// Dir is the sandbox's state directory on the host; Dir()/app is /app.
func (s *Sandbox) Dir() string { return s.l.dir }

func (s *Sandbox) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return goruntime.ErrClosed
	}
	return s.gone
}

// Watching the runtime server during a call. Commands run as the server's
// uid inside the sandbox, so they can stop (SIGSTOP) or kill it; the
// sandbox's keepers cannot help, and a stopped server would hold every
// call until the caller's deadline. So while a call is in flight a watcher
// reads the server's state from /proc every watchInterval, and a failed
// call is diagnosed before it is reported.
const (
	watchInterval = 500 * time.Millisecond
	probeTimeout  = 2 * time.Second // for GET / to a server that may be wedged
	// execGrace is how long past a command's own timeout (when the server
	// kills it) a call waits for the answer over the unix socket: the
	// one client-side grace of this backend (goruntime.Sandbox.Exec).
	execGrace = 15 * time.Second
)

// errServerWedged is the cancel cause the watcher gives a call.
var errServerWedged = errors.New("the runtime server stopped answering")

// do runs one call to the server with fn, under ctx and, when limit > 0,
// a client-side deadline of limit. A failure that is not the server's
// answer (transport error, deadline) is diagnosed: when the server has
// exited or does not answer a readiness probe within probeTimeout, the
// sandbox is killed and the error wraps goruntime.ErrSandboxGone, and so
// does every later call. Errors wrapping a goruntime sentinel the server
// answered with (ErrNotExist, ErrPathEscape, ErrTooLarge, fs.ErrPermission)
// pass unchanged.
func (s *Sandbox) do(ctx context.Context, what string, limit time.Duration, fn func(context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if limit > 0 {
		var stop context.CancelFunc
		cctx, stop = context.WithTimeout(cctx, limit)
		defer stop()
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(cctx, cancel)
	}()
	err := fn(cctx)
	cancel(nil)
	<-watched
	if err == nil || errors.Is(err, goruntime.ErrNotExist) || errors.Is(err, goruntime.ErrPathEscape) || errors.Is(err, goruntime.ErrTooLarge) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	if gone := s.diagnose(ctx, context.Cause(cctx), err); gone != nil {
		return fmt.Errorf("%s in local sandbox %s: %w", what, s.meta.ID, gone)
	}
	return fmt.Errorf("%s in local sandbox %s: %w", what, s.meta.ID, err)
}

// watch cancels a call (cause errServerWedged) when the server process
// is stopped or has exited and does not answer a readiness probe. It
// returns when ctx ends.
func (s *Sandbox) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st := s.serverState(); st == "running" || st == "unknown" {
			continue
		}
		if s.probe() != nil {
			cancel(errServerWedged)
			return
		}
	}
}

// serverState is "running", "stopped" (SIGSTOP or traced), "exited"
// (gone or a zombie) or "unknown" (pid not recorded).
func (s *Sandbox) serverState() string {
	if s.meta.Server <= 0 {
		if !procfs.Alive(s.meta.PID, s.meta.StartTime) {
			return "exited"
		}
		return "unknown"
	}
	if !procfs.Alive(s.meta.Server, s.meta.ServerAt) || !procfs.Alive(s.meta.PID, s.meta.StartTime) {
		return "exited"
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(s.meta.Server) + "/stat")
	if err != nil {
		return "exited"
	}
	if i := strings.LastIndexByte(string(data), ')'); i >= 0 {
		if f := strings.Fields(string(data[i+1:])); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
			return "stopped"
		}
	}
	return "running"
}

// probe asks the server's readiness with a short timeout of its own.
func (s *Sandbox) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	return s.cl.ready(ctx)
}

// diagnose decides whether a failed call means the sandbox is gone (cause
// is the call's context cause, err its error). If so it kills what is
// left of the sandbox, records the error for later calls and returns it;
// otherwise it returns nil. A call the caller cancelled is not probed
// unless the watcher had found the server stopped.
func (s *Sandbox) diagnose(ctx context.Context, cause, err error) error {
	var why string
	switch st := s.serverState(); {
	case errors.Is(cause, errServerWedged):
		why = fmt.Sprintf("the runtime server stopped answering (its process is %s; a command may have sent it SIGSTOP)", s.serverState())
	case st == "exited":
		why = "the runtime server exited (killed by a command, or by the OOM killer)"
	case errors.Is(ctx.Err(), context.Canceled):
		return nil
	default:
		if s.probe() == nil {
			return nil
		}
		if s.serverState() == "exited" {
			why = "the runtime server exited (killed by a command, or by the OOM killer)"
		} else {
			why = fmt.Sprintf("the runtime server stopped answering (no answer to a readiness probe within %s)", probeTimeout)
		}
	}
	gone := fmt.Errorf("%w: %s; the sandbox was stopped and its files are lost (%v)", goruntime.ErrSandboxGone, why, err)
	s.mu.Lock()
	if s.gone == nil {
		s.gone = fmt.Errorf("local sandbox %s: %w", s.meta.ID, gone)
	}
	s.mu.Unlock()
	if kerr := s.meta.Cgroup.kill(nil, 5*time.Second); kerr != nil {
		s.b.opts.Logger.Warn("local sandbox: kill after the server stopped answering", "id", s.meta.ID, "err", kerr)
	}
	return gone
}

// execLimit is the client-side deadline of a command: its own timeout
// (the server ends it then) plus execGrace.
func (s *Sandbox) execLimit(req goruntime.ExecRequest) time.Duration {
	t := req.Timeout
	if t <= 0 {
		t = s.b.opts.ExecTimeout
	}
	return t + execGrace
}

// Exec runs a command (see goruntime.Sandbox). It reads the cgroup's
// limit counters around the call to fill ExecResult.Limit, and after a
// command that ran into the memory or process limit it kills whatever the
// command left behind in the sandbox, so the next command starts clean.
func (s *Sandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if req.NeedsProcessAPI() || (req.Dir != "" && req.Dir != ".") {
		return nil, fmt.Errorf("execute in local sandbox %s: stdin, signals and a working directory need ExecStream (the process API), not Exec", s.meta.ID)
	}
	before := s.meta.Cgroup.counters()
	var resp *wire.ExecuteResponse
	err := s.do(ctx, "execute", s.execLimit(req), func(ctx context.Context) error {
		var err error
		resp, err = s.cl.exec(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &goruntime.ExecResult{
		Stdout:          resp.Stdout,
		Stderr:          resp.Stderr,
		ExitCode:        resp.ExitCode,
		StdoutTruncated: resp.StdoutTruncated,
		StderrTruncated: resp.StderrTruncated,
		TimedOut:        resp.TimedOut,
		Duration:        time.Duration(resp.DurationMS * float64(time.Millisecond)),
	}
	s.finishExec(ctx, before, res, resp.Signal)
	return res, nil
}

// WriteFile uploads r to /app/name; name must not contain "/". Errors
// wrap ErrPathEscape for a bad name, fs.ErrPermission when the sandbox's
// user may not write there, ErrTooLarge over the upload limit.
func (s *Sandbox) WriteFile(ctx context.Context, name string, r io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("write %q: want a plain file name: %w", name, goruntime.ErrPathEscape)
	}
	return s.do(ctx, "upload "+name, 0, func(ctx context.Context) error {
		return s.cl.upload(ctx, name, r)
	})
}

// ReadFile returns the content of a file under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the file is inside /app but the sandbox's user may not
// read it, e.g. a command made it mode 000).
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var data []byte
	err := s.do(ctx, "read "+path, 0, func(ctx context.Context) error {
		var err error
		data, err = s.cl.download(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// List returns the entries of a directory under /app. Errors wrap
// ErrNotExist, ErrPathEscape (the path leads outside /app) or
// fs.ErrPermission (the directory is inside /app but the sandbox's user
// may not read it).
func (s *Sandbox) List(ctx context.Context, path string) ([]goruntime.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []goruntime.FileInfo
	err := s.do(ctx, "list "+path, 0, func(ctx context.Context) error {
		var err error
		out, err = s.cl.list(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Close destroys the sandbox: its processes, cgroup and state directory.
// Calling it again returns nil.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	s.cl.close()
	s.proc.close()
	if s.lifeline != nil {
		s.lifeline.Close() // the lifeline shell exits, and the sandbox with it
	}
	var errs []error
	cg := s.meta.Cgroup
	if err := cg.remove(); err != nil {
		errs = append(errs, err)
	}
	if s.exited != nil {
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			errs = append(errs, fmt.Errorf("bubblewrap (pid %d) did not exit", s.meta.PID))
		}
	} else if procfs.Alive(s.meta.PID, s.meta.StartTime) {
		_ = syscall.Kill(s.meta.PID, syscall.SIGKILL)
	}
	if err := s.b.trash(s.l.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close local sandbox %s: %w", s.meta.ID, err)
	}
	return nil
}

// Disconnect leaves the sandbox running for Backend.Attach, from this or
// another process, and releases this client.
func (s *Sandbox) Disconnect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	s.cl.close()
	s.proc.close()
	if s.lifeline != nil {
		_, err := s.lifeline.Write([]byte("detach\n"))
		s.lifeline.Close()
		if err != nil {
			return fmt.Errorf("disconnect local sandbox %s: %w", s.meta.ID, err)
		}
	}
	return nil
}

func keepSet(pids []int) map[int]bool {
	m := make(map[int]bool, len(pids))
	for _, p := range pids {
		m[p] = true
	}
	return m
}

// protectFromOOM keeps the OOM killer off the processes that hold the
// sandbox together (bubblewrap, its init, the lifeline shell and its
// watcher). The server is left at its value: commands inherit the lowest
// value they may go back to from it, and the server starts each command
// at 1000 (internal/server), so the OOM killer takes commands
// before it. Needs CAP_SYS_RESOURCE; without it this does nothing.
func protectFromOOM(pids []int) {
	server := findServer(pids)
	for _, p := range pids {
		if p != server {
			_ = os.WriteFile("/proc/"+strconv.Itoa(p)+"/oom_score_adj", []byte("-1000"), 0o644)
		}
	}
}

// findServer returns the pid of the runtime server among pids, or 0.
func findServer(pids []int) int {
	for _, p := range pids {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 == serverBin {
			return p
		}
	}
	return 0
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeTree deletes dir, making read-only directories (which a sandbox
// may leave, e.g. a module cache) writable first when needed.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
