package local

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/nslimits"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// startSlots is how many sandboxes start at once; more Opens wait their
// turn before starting, so that StartTimeout bounds a start, not its
// queue: 200 MCP sessions opening at once on 2 CPUs, each start beside
// the others and the first builds of those already open, left some
// servers past 15 s.
func startSlots() int { return 2*runtime.NumCPU() + 2 }

// open starts a sandbox. A pooled one (for the warm pool) starts at the
// lowest CPU weight; claiming it gives it the full weight. idleExit, when
// positive, is its runtime server's --idle-exit (a handle's sandbox).
func (b *Backend) open(ctx context.Context, pooled bool, idleExit time.Duration) (_ *Sandbox, err error) {
	// The seed, or while it builds an empty cache: no start waits for it.
	seed, seeded, err := b.seeds.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	select {
	case b.starts <- struct{}{}:
		defer func() { <-b.starts }()
	case <-ctx.Done():
		return nil, fmt.Errorf("local backend: waiting for one of the %d sandbox starts under way to end: %w", cap(b.starts), ctx.Err())
	}
	if err := checkTasks(b.taskLimit); err != nil {
		return nil, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
	}
	id := sandboxid.New()
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	defer func() {
		if err != nil {
			_ = tree.Remove(l.dir)
		}
	}()
	st, err := b.prepareStorage(ctx, &l, seed)
	if err != nil {
		return nil, err
	}
	if seeded { // spares are made with the seed only (seedReady)
		defer b.refillStorage(seed)
	}
	defer func() {
		if err != nil {
			st.release(l.dir)
		}
	}()
	if err := writeEtc(l); err != nil {
		return nil, fmt.Errorf("write sandbox /etc files: %w", err)
	}
	// A memory disk's run directory exists once the sandbox runs: its
	// module proxy socket is served after the start.
	if !l.memory {
		if err := b.serveModules(id, l, st.uid); err != nil {
			return nil, fmt.Errorf("local backend: %w", err)
		}
	}
	defer func() {
		if err != nil {
			b.stopModules(id)
		}
	}()
	cg, err := b.newCgroup(ctx, id, pooled)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cg.Remove()
		}
	}()

	if err := os.MkdirAll(l.logDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create server log directory: %w", err)
	}
	logf, err := os.OpenFile(l.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	// Read through a descriptor of its own: on a disk that leaves the
	// host the path does too, and a dead sandbox's log with it.
	logr, err := os.Open(l.log())
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	defer func() {
		if err != nil {
			logr.Close()
		}
	}()
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

	var x extraFiles
	if fd := x.add(lifeR); fd != lifelineFD {
		lifeW.Close()
		return nil, fmt.Errorf("local backend: lifeline is fd %d, want %d", fd, lifelineFD)
	}
	releaseFD := x.add(gateR) // read by the gate and closed before bubblewrap runs
	defer x.close()
	bargs, err := b.bwrapArgs(l, &x, idleExit)
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("local backend: %w", err)
	}
	// The gate (package gate) waits for its release, which comes once it
	// is in the sandbox's cgroup (and its ids are mapped), then sets the
	// rlimits, mounts a memory disk, makes the network namespace with its
	// limits (netns.go), takes the sandbox's ids and becomes bubblewrap:
	// every sandbox process starts inside the limits.
	plan := gate.Plan{WaitFD: releaseFD, Pass: x.pass(releaseFD), Rlimits: b.opts.rlimits(), Disk: st.memory, Net: b.opts.netPlan(), Command: append([]string{b.bwrap}, bargs...)}
	plan.UID, plan.GID = st.gateIDs()
	if st.disk != nil && st.memory == nil {
		// The disk goes with the sandbox into a mount namespace of its
		// own, without the other sandboxes' (internal/gate/mounts.go).
		plan.Mounts = &gate.Mounts{Keep: st.disk.Dir, Drop: []string{diskMounts, b.disksDir()}}
	}
	cmd, err := gate.Command(b.server, plan, gateNS(st.ns, plan), gateEnv())
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("local backend: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = x.files
	// The gate has a session of its own (gate.Command): the terminal's
	// signals (Ctrl-C) reach the sandbox only through the lifeline, so
	// Disconnect can leave it running.
	if err := cmd.Start(); err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("start bubblewrap: %w: %w", err, goruntime.ErrUnavailable)
	}
	x.close()
	exited := make(chan struct{})
	go func() { waitCmd(cmd); close(exited) }()
	pid := cmd.Process.Pid
	fail := func(e error) (*Sandbox, error) {
		lifeW.Close()
		_ = cmd.Process.Kill()
		<-exited
		return nil, e
	}
	// Its user namespace's ids are mapped (newuidmap, newgidmap) while it
	// joins the cgroup.
	mapped := make(chan error, 1)
	go func() { mapped <- gate.Map(ctx, pid, st.ns) }()
	addErr := cg.Add(pid)
	if err := cmp.Or(<-mapped, addErr); err != nil {
		return fail(cmp.Or(b.gateEnded(cmd, exited, logr), fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)))
	}
	if _, err := gateW.Write([]byte("go\n")); err != nil {
		return fail(cmp.Or(b.gateEnded(cmd, exited, logr), fmt.Errorf("release bubblewrap: %w", err)))
	}
	if st.disk != nil {
		// From here on this process reaches the disk as the sandbox
		// sees it: through bubblewrap's root, once it runs.
		seeDisk(&l, pid)
	}

	s := &Sandbox{b: b, l: l, cl: l.client(serverUID(st.uid), b.opts.OutputBytes), lifeline: lifeW, exited: exited, log: logr}
	// A pool start runs at a low CPU weight (cgroups.Limits.Background):
	// under contention it may take longer than an Open's start would, and
	// is bounded by the pool's own poolStartTime (ctx) instead.
	ready := b.opts.StartTimeout
	if pooled {
		ready = poolStartTime
	}
	if err := s.waitReady(ctx, exited, ready); err != nil {
		s.cl.Close()
		return fail(err)
	}
	if l.memory {
		if err := b.serveModules(id, l, st.uid); err != nil {
			s.cl.Close()
			return fail(fmt.Errorf("local backend: %w", err))
		}
	} else if st.disk != nil {
		// The server answers, so its gate has made the sandbox's mount
		// namespace, with the disk in it: the host lets go of its own.
		if err := st.disk.LeaveHost(); err != nil {
			s.cl.Close()
			return fail(fmt.Errorf("local backend: %w", err))
		}
	}
	pst, _ := procfs.ReadStat(pid)
	s.meta = meta{ID: id, PID: pid, StartTime: pst.StartTime, Cgroup: *cg, Created: time.Now().UTC(), Network: b.opts.Network, HostUID: st.uid, Disk: st.disk}
	if procs, err := cg.Procs(); err == nil {
		s.meta.Keep = procs
	}
	s.keep = keepSet(s.meta.Keep)
	s.meta.Server = serverPID(s.meta.Keep)
	if st, err := procfs.ReadStat(s.meta.Server); err == nil {
		s.meta.ServerAt = st.StartTime
	}
	// No command has run yet: only Open's caller can start one.
	// As root or as the user who made the sandbox's namespaces.
	if err := nslimits.CapPtys(ctx, s.meta.Server); err != nil {
		s.cl.Close()
		return fail(fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable))
	}
	protectFromOOM(s.meta.Keep)
	if err := writeJSON(l.meta(), s.meta); err != nil {
		s.cl.Close()
		return fail(fmt.Errorf("write sandbox state: %w", err))
	}
	b.opts.Logger.DebugContext(ctx, "local sandbox open", "id", id, "pid", pid)
	return s, nil
}

// waitReady polls the server until it answers, bubblewrap exits, or
// timeout passes.
func (s *Sandbox) waitReady(ctx context.Context, exited <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := time.Millisecond
	for {
		if _, err := os.Stat(s.l.socket()); err == nil {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			err := s.cl.Ready(rctx)
			rcancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return s.b.exitedEarly(s.log, "")
		case <-ctx.Done():
			hint := ""
			if s.b.childMode {
				hint = " (is local.ServeIfChild() the first call in main?)"
			}
			return fmt.Errorf("local backend: runtime server did not answer within %v%s; log: %s: %w",
				timeout, hint, tail(s.log, 1500), ctx.Err())
		case <-time.After(delay):
		}
		if delay < 10*time.Millisecond {
			delay += time.Millisecond
		}
	}
}

// exitedEarly is the error for a sandbox whose processes ended before its
// runtime server answered, with the end of its log; why (if any) says
// which step saw it.
func (b *Backend) exitedEarly(log *os.File, why string) error {
	hint := ""
	if b.childMode {
		hint = fmt.Sprintf(" (the server is this program, %s, re-executed: its main must call local.ServeIfChild() first thing, or set Options.ServerPath / $GORUNTIME_SANDBOX_SERVER to a sandbox-server binary)", b.server)
	}
	return fmt.Errorf("local backend: sandbox exited before its runtime server answered%s%s; log: %s: %w",
		why, hint, tail(log, 1500), goruntime.ErrUnavailable)
}

// gateEnded reports, after a step of the start failed, whether the reason
// is that the gate itself has ended: the server binary starts as the gate
// and waits for its release, so one that is not a sandbox-server binary
// (or one that crashed) ends before the cgroup or the id mapping can take
// it. It returns nil while the gate still runs.
func (b *Backend) gateEnded(cmd *exec.Cmd, exited <-chan struct{}, log *os.File) error {
	select {
	case <-exited:
	case <-time.After(500 * time.Millisecond): // one that is gone is reaped at once (waitCmd)
		return nil
	}
	return b.exitedEarly(log, fmt.Sprintf(": its first process, %s started as the gate, ended (%v) before its release, which a sandbox-server binary waits for", b.server, cmd.ProcessState))
}

func (b *Backend) attach(ctx context.Context, id string) (*Sandbox, error) {
	if !sandboxid.Valid(id) {
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
	if m.Disk != nil {
		l.disk = m.Disk.Dir
		l.memory, l.ownIDs = m.Disk.Memory, m.Disk.OwnIDs
		if m.Disk.InSandboxNS() {
			seeDisk(&l, m.PID)
		}
	}
	if m.Server == 0 {
		m.Server = serverPID(m.Keep)
		if st, err := procfs.ReadStat(m.Server); err == nil {
			m.ServerAt = st.StartTime
		}
	}
	s := &Sandbox{b: b, l: l, meta: m, cl: l.client(serverUID(m.HostUID), b.opts.OutputBytes), keep: keepSet(m.Keep)}
	s.log, _ = os.Open(l.log()) // nil if it is gone: exitedWhy then has no last words to read
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.cl.Ready(rctx); err != nil {
		if ctx.Err() != nil {
			s.cl.Close()
			s.closeLog()
			return nil, fmt.Errorf("attach local sandbox %s: %w", id, ctx.Err())
		}
		return s.attachFailed(ctx, err)
	}
	// The process that opened it may be gone, and its module proxy
	// socket with it: serve it from this one.
	if err := b.serveModules(id, l, m.HostUID); err != nil {
		b.opts.Logger.Warn("local sandbox: module proxy not served; module downloads will fail until the next attach", "id", id, "err", err)
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
