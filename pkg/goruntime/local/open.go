package local

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/nslimits"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// startSlots is how many sandboxes start at once; more Opens wait their
// turn before starting, so that StartTimeout bounds a start, not its
// queue: 200 MCP sessions opening at once on 2 CPUs, each start beside
// the others and the first builds of those already open, left some
// servers past 15 s.
func startSlots() int { return 2*runtime.NumCPU() + 2 }

// open starts a sandbox. pooled, for the warm pool's start, is that
// start: it runs at the lowest CPU weight unless an Open waits for it,
// and claiming the sandbox gives it the full weight (poolweight.go);
// nil for any other start. idleExit, when positive, is its runtime
// server's --idle-exit (a handle's sandbox).
// The start is a few named steps (opening), each pushing the undo of
// what it made: a step that fails undoes every earlier one, last first.
func (b *Backend) open(ctx context.Context, pooled *poolStart, idleExit time.Duration) (*Sandbox, error) {
	o := &opening{b: b, ctx: ctx, pooled: pooled, idleExit: idleExit}
	if err := o.run(o.startSlot, o.storage, o.cgroup, o.logs, o.gate, o.release, o.ready, o.record); err != nil {
		return nil, err
	}
	b.opts.Logger.DebugContext(ctx, "local sandbox open", "id", o.id, "pid", o.pid)
	return o.s, nil
}

// opening is one sandbox start under way (Backend.open): what its steps
// made so far, and what finish runs at the end.
type opening struct {
	b        *Backend
	ctx      context.Context
	pooled   *poolStart // the warm pool's start this is, or nil
	idleExit time.Duration

	seed   string // the seed build cache, or while it builds an empty one
	seeded bool   // seed is complete: spares are made from it (seedReady)
	id     string
	l      layout
	st     storage
	cg     *cgroups.Cgroup

	logf, logr *os.File // the server's log, written and read
	lifeW      *os.File // the lifeline's write end, which the Sandbox holds
	gateW      *os.File // the gate's release
	joins      bool     // the gate joins its cgroup itself (gate.Plan.Join)
	x          extraFiles
	cmd        *exec.Cmd
	exited     chan struct{} // closed once cmd is reaped
	pid        int
	s          *Sandbox
	cleanups   []cleanup // finish runs them last first
}

// cleanup is one thing finish runs: always, or only when the start
// failed (the undo of a step).
type cleanup struct {
	f      func()
	onFail bool
}

// always has finish run f whether the start succeeds or not.
func (o *opening) always(f func()) { o.cleanups = append(o.cleanups, cleanup{f: f}) }

// undo has finish run f if a later step fails.
func (o *opening) undo(f func()) { o.cleanups = append(o.cleanups, cleanup{f: f, onFail: true}) }

// run runs steps in order until one fails, then finishes: with the
// undos of every step begun when one failed (its error is run's).
func (o *opening) run(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			o.finish(false)
			return err
		}
	}
	o.finish(true)
	return nil
}

// finish runs the cleanups, last first: the undos too unless ok.
func (o *opening) finish(ok bool) {
	for i := len(o.cleanups) - 1; i >= 0; i-- {
		if c := o.cleanups[i]; !c.onFail || !ok {
			c.f()
		}
	}
}

// startSlot finds the seed (no start waits for its build) and takes one
// of the backend's start slots (startSlots), then checks the host's
// tasks have room.
func (o *opening) startSlot() error {
	var err error
	if o.seed, o.seeded, err = o.b.seeds.Current(o.ctx); err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	select {
	case o.b.starts <- struct{}{}:
		o.always(func() { <-o.b.starts })
	case <-o.ctx.Done():
		return fmt.Errorf("local backend: waiting for one of the %d sandbox starts under way to end: %w", cap(o.b.starts), o.ctx.Err())
	}
	if err := checkTasks(o.b.taskLimit); err != nil {
		return fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
	}
	return nil
}

// storage makes the sandbox's directory and writable storage
// (storer.prepare), its /etc files and, on a disk of the host, its
// module proxy socket (a memory disk's is served once it runs: ready).
func (o *opening) storage() error {
	o.id = sandboxid.New()
	o.l = layout{dir: filepath.Join(o.b.sandboxes, o.id)}
	o.undo(func() { _ = tree.Remove(o.l.dir) })
	var err error
	if o.st, err = (storer{o.b}).prepare(o.ctx, &o.l, o.seed); err != nil {
		return err
	}
	if o.seeded { // spares are made with the seed only (seedReady)
		o.always(o.refillSpares)
	}
	o.undo(func() { _ = o.st.release(o.l.dir) })
	if err := writeEtc(o.l); err != nil {
		return fmt.Errorf("write sandbox /etc files: %w", err)
	}
	if !o.l.memory {
		if err := o.b.modules.serve(o.id, o.l, o.st.uid); err != nil {
			return fmt.Errorf("local backend: %w", err)
		}
	}
	o.undo(func() { o.b.modules.stop(o.id) })
	return nil
}

// refillSpares tops up the spare storage new sandboxes are made on once
// the start ends, unless an Open waits for this start (a fresh process's
// first): the fill would run beside that Open's first command, which
// took 8 % longer for it (170 against 156 ms, p50 of 12 fresh backends
// each). The pool's next start, once that sandbox's first commands have
// run (refillAfter), tops them up instead.
func (o *opening) refillSpares() {
	if o.pooled != nil && o.b.pool.waitedFor(o.pooled) {
		return
	}
	(storer{o.b}).refill(o.seed)
}

// cgroup makes the sandbox's cgroup, within the memory budget (budget.go);
// a pool start's is then the pool's to weigh until the start ends
// (poolweight.go).
func (o *opening) cgroup() error {
	cg, err := o.b.budget.newCgroup(o.ctx, o.id, o.pooled != nil)
	if err != nil {
		return err
	}
	o.cg = cg
	o.undo(func() { _ = cg.Remove() })
	if o.pooled != nil {
		o.undo(func() { o.b.pool.ended(o.pooled) }) // before the cgroup goes
		o.b.pool.made(o.pooled, cg)
	}
	return nil
}

// logs opens the server's log, written by the gate and read through a
// descriptor of its own: on a disk that leaves the host the path does
// too, and a dead sandbox's log with it.
func (o *opening) logs() error {
	if err := os.MkdirAll(o.l.logDir(), 0o700); err != nil {
		return fmt.Errorf("create server log directory: %w", err)
	}
	logf, err := os.OpenFile(o.l.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	o.logf = logf
	o.always(func() { logf.Close() })
	logr, err := os.Open(o.l.log())
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	o.logr = logr
	o.undo(func() { logr.Close() })
	return nil
}

// gate starts the server's binary as the sandbox's gate (package gate)
// with the lifeline and its release pipe. The gate waits for its release
// (release), then sets the rlimits, mounts a memory disk, makes the
// network namespace with its limits (netns.go), takes the sandbox's ids
// and becomes bubblewrap: every sandbox process starts inside the limits.
func (o *opening) gate() error {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return err
	}
	o.lifeW = lifeW
	o.always(func() { lifeR.Close() })
	o.undo(func() { lifeW.Close() })
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return err
	}
	o.gateW = gateW
	o.always(func() { gateR.Close(); gateW.Close() })
	if fd := o.x.add(lifeR); fd != lifelineFD {
		return fmt.Errorf("local backend: lifeline is fd %d, want %d", fd, lifelineFD)
	}
	releaseFD := o.x.add(gateR) // read by the gate and closed before bubblewrap runs
	o.always(o.x.close)
	cmd, err := o.gateCommand(releaseFD)
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	// The gate has a session of its own (gate.Command): the terminal's
	// signals (Ctrl-C) reach the sandbox only through the lifeline, so
	// Disconnect can leave it running.
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start bubblewrap: %w: %w", err, goruntime.ErrUnavailable)
	}
	o.x.close()
	o.cmd, o.pid, o.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() { waitCmd(cmd); close(o.exited) }()
	o.undo(func() { _ = cmd.Process.Kill(); <-o.exited })
	return nil
}

// gateCommand is the gate's command: its plan (gate.Plan) and
// bubblewrap's arguments.
func (o *opening) gateCommand(releaseFD int) (*exec.Cmd, error) {
	b := o.b
	bargs, err := b.host.bwrapArgs(o.l, &o.x, o.idleExit)
	if err != nil {
		return nil, err
	}
	plan := gate.Plan{WaitFD: releaseFD, Pass: o.x.pass(releaseFD), Rlimits: b.opts.rlimits(), Disk: o.st.memory, Net: b.opts.netPlan(), Command: append([]string{b.host.bwrap}, bargs...)}
	plan.UID, plan.GID = o.st.gateIDs()
	// On cgroup v1 the gate moves its own thread into the cgroups, which
	// is ~10 ms quicker than this process moving it
	// (cgroups.Cgroup.ThreadFiles): as root, or as the user who made them
	// (a user's gate runs in a user namespace whose root is the user);
	// ready checks that it did.
	plan.Join = o.cg.ThreadFiles()
	o.joins = len(plan.Join) > 0
	if o.st.disk != nil && o.st.memory == nil {
		// The disk goes with the sandbox into a mount namespace of its
		// own, without the other sandboxes' (internal/gate/mounts.go).
		plan.Mounts = &gate.Mounts{Keep: o.st.disk.Dir, Drop: []string{diskMounts, b.disks.dir}}
	}
	cmd, err := gate.Command(b.host.server, plan, gateNS(o.st.ns, plan), gateEnv())
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = o.logf, o.logf
	cmd.ExtraFiles = o.x.files
	return cmd, nil
}

// release maps the gate's user namespace ids (newuidmap, newgidmap)
// while it moves the gate into the cgroup (unless the gate joins it
// itself: joins), then releases it. A failure that is the
// gate's own end (not a sandbox-server binary) says so (gateEnded).
func (o *opening) release() error {
	mapped := make(chan error, 1)
	go func() { mapped <- gate.Map(o.ctx, o.pid, o.st.ns) }()
	var addErr error
	if !o.joins {
		addErr = o.cg.Add(o.pid)
	}
	if err := cmp.Or(<-mapped, addErr); err != nil {
		return cmp.Or(o.gateEnded(), fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable))
	}
	if _, err := o.gateW.Write([]byte("go\n")); err != nil {
		return cmp.Or(o.gateEnded(), fmt.Errorf("release bubblewrap: %w", err))
	}
	if o.st.disk != nil {
		// From here on this process reaches the disk as the sandbox
		// sees it: through bubblewrap's root, once it runs.
		seeDisk(&o.l, o.pid)
	}
	return nil
}

// ready waits for the runtime server to answer, then serves a memory
// disk's module proxy, or lets the host go of a disk the sandbox's mount
// namespace now holds.
func (o *opening) ready() error {
	b := o.b
	s := &Sandbox{b: b, l: o.l, cl: o.l.client(serverUID(o.st.uid), b.opts.OutputBytes), lifeline: o.lifeW, exited: o.exited, log: o.logr}
	if o.st.disk != nil && o.st.memory == nil {
		s.seed = seed.WithExtra(o.seed) // what storer.onDisk claimed the disk with
	}
	o.s = s
	o.undo(func() { s.cl.Close() })
	// A pool start runs at a low CPU weight (cgroups.Limits.Background)
	// while no Open waits for it: under contention it may take longer
	// than an Open's start would, and is bounded by the pool's own
	// poolStartTime (ctx) instead.
	wait := b.opts.StartTimeout
	if o.pooled != nil {
		wait = poolStartTime
	}
	if err := o.waitReady(wait); err != nil {
		return err
	}
	if o.joins {
		// The gate joined its cgroup before anything else after its
		// release, or ended; the server answers, so it ran on: trust
		// nothing, check.
		if err := o.cg.Holds(o.pid); err != nil {
			return fmt.Errorf("local backend: the sandbox's gate did not join its cgroup: %w: %w", err, goruntime.ErrUnavailable)
		}
	}
	if o.l.memory {
		if err := b.modules.serve(o.id, o.l, o.st.uid); err != nil {
			return fmt.Errorf("local backend: %w", err)
		}
	} else if o.st.disk != nil {
		// The server answers, so its gate has made the sandbox's mount
		// namespace, with the disk in it: the host lets go of its own.
		if err := o.st.disk.LeaveHost(); err != nil {
			return fmt.Errorf("local backend: %w", err)
		}
	}
	return nil
}

// record fills the sandbox's meta (its processes, which it keeps alive),
// caps its ptys before any command runs, protects it from the OOM
// killer and writes its state file, which makes it attachable.
func (o *opening) record() error {
	s := o.s
	pst, _ := procfs.ReadStat(o.pid)
	s.meta = meta{ID: o.id, PID: o.pid, StartTime: pst.StartTime, Cgroup: *o.cg, Created: time.Now().UTC(), Network: o.b.opts.Network, HostUID: o.st.uid, Disk: o.st.disk}
	if procs, err := o.cg.Procs(); err == nil {
		s.meta.Keep = procs
	}
	s.keep = keepSet(s.meta.Keep)
	s.meta.Server = serverPID(s.meta.Keep)
	if st, err := procfs.ReadStat(s.meta.Server); err == nil {
		s.meta.ServerAt = st.StartTime
	}
	// No command has run yet: only Open's caller can start one.
	// As root or as the user who made the sandbox's namespaces.
	if err := nslimits.CapPtys(o.ctx, s.meta.Server); err != nil {
		return fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
	}
	protectFromOOM(s.meta.Keep)
	if err := writeJSON(o.l.meta(), s.meta); err != nil {
		return fmt.Errorf("write sandbox state: %w", err)
	}
	return nil
}
