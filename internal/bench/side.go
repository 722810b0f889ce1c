package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// A side of the rootless section is a copy of the bench binary that runs
// local backends as root or as another user and times what the parent
// asks for, one request at a time: JSON lines on its stdin, one reply per
// request on its stdout (its progress and the backends' logs go to
// stderr). Both sides run the same code; only the user differs. EOF on
// stdin closes its backends and ends it.

// sideEnv marks a process started as a side; its value names the side.
const sideEnv = "GO_RUNTIME_SANDBOX_BENCH_SIDE"

// Side requests (sideRequest.Op).
const (
	opSetup  = "setup"  // make the backends and warm session; replies with sideHello
	opSettle = "settle" // wait (up to 5 s) until the warm pool is full
	opOpen   = "open"   // time Open, with the warm pool or without
	opFirst  = "first"  // time Command as the first of a fresh session
	opWarm   = "warm"   // time Command in the warm session
	// opSnapshots measures the snapshots section's figures in the side
	// (snapshots.go); replies with its rows.
	opSnapshots = "snapshots"
)

type sideRequest struct {
	Op      string     `json:"op"`
	Setup   *sideSetup `json:"setup,omitempty"`
	Pool    bool       `json:"pool,omitempty"`    // open: claim from the warm pool
	Command string     `json:"command,omitempty"` // first, warm
	Code    int        `json:"code,omitempty"`    // first, warm: smallModule's round, new code every time
	Rounds  int        `json:"rounds,omitempty"`  // snapshots
}

// sideSetup is what a side's backends run with.
type sideSetup struct {
	ServerPath string `json:"server_path"`
	StateDir   string `json:"state_dir"`
	// Rootless: the side must not be root, and relaxes the disk quota
	// when (and only when) Check reports it unavailable. A side that is
	// not rootless must be root and relaxes nothing.
	Rootless bool     `json:"rootless"`
	Commands []string `json:"commands"` // run once in the warm session
}

type sideReply struct {
	Err   string        `json:"err,omitempty"`
	Took  time.Duration `json:"took,omitempty"`
	Hello *sideHello    `json:"hello,omitempty"`
	Rows  []Row         `json:"rows,omitempty"` // snapshots
}

// sideHello is a side's answer to setup: who it runs as and what its
// sandboxes run under.
type sideHello struct {
	UID, EUID   int
	Protections []local.Protection // local.Check's, with the Relax the backends got
	Notes       []string           // for the report (a seed build that came first)
}

// sideOps is what a side does; side is the real one.
type sideOps interface {
	setup(ctx context.Context, s sideSetup) (*sideHello, error)
	settle()
	open(ctx context.Context, pool bool) (time.Duration, error)
	first(ctx context.Context, command string, code int) (time.Duration, error)
	warm(ctx context.Context, command string, code int) (time.Duration, error)
	snapshots(ctx context.Context, rounds int) ([]Row, error)
	close(ctx context.Context) error
}

// ServeIfSide serves as a side of the rootless section and exits when this
// process was started as one (cmd/bench's main calls it first thing, after
// local.ServeIfChild); otherwise it returns at once.
func ServeIfSide() {
	name := os.Getenv(sideEnv)
	if name == "" {
		return
	}
	os.Unsetenv(sideEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := serveSide(ctx, os.Stdin, os.Stdout, &side{log: os.Stderr})
	stop()
	os.Exit(code)
}

// exitSideBroken is the side's exit code when its pipe to the benchmark
// breaks: a request it cannot read, an answer it cannot write.
const exitSideBroken = 2

// serveSide answers requests from in on out until in ends, then closes
// ops. It returns the exit code: 0, or exitSideBroken.
func serveSide(ctx context.Context, in io.Reader, out io.Writer, ops sideOps) int {
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	defer func() { _ = ops.close(context.WithoutCancel(ctx)) }()
	for {
		var req sideRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "bench side: read request: %v\n", err)
			return exitSideBroken
		}
		var rep sideReply
		var err error
		switch req.Op {
		case opSetup:
			if req.Setup == nil {
				err = errors.New("setup without its settings")
				break
			}
			rep.Hello, err = ops.setup(ctx, *req.Setup)
		case opSettle:
			ops.settle()
		case opOpen:
			rep.Took, err = ops.open(ctx, req.Pool)
		case opFirst:
			rep.Took, err = ops.first(ctx, req.Command, req.Code)
		case opWarm:
			rep.Took, err = ops.warm(ctx, req.Command, req.Code)
		case opSnapshots:
			rep.Rows, err = ops.snapshots(ctx, req.Rounds)
		default:
			err = fmt.Errorf("unknown request %q", req.Op)
		}
		if err != nil {
			rep.Err = err.Error()
		}
		if err := enc.Encode(rep); err != nil {
			return exitSideBroken
		}
	}
}

// side runs a pooled backend (the default warm pool; fresh sessions and
// the warm session come from it), an unpooled one, and a warm session.
type side struct {
	log              io.Writer
	pooled, unpooled *local.Backend
	warmSession      *goruntime.Session
	opts             local.Options // the pooled backend's
}

func (s *side) setup(ctx context.Context, c sideSetup) (*sideHello, error) {
	h := &sideHello{UID: os.Getuid(), EUID: os.Geteuid()}
	switch root := h.EUID == 0 || h.UID == 0; {
	case c.Rootless && root:
		return nil, fmt.Errorf("the rootless side runs as uid %d (effective %d): want a user other than root", h.UID, h.EUID)
	case !c.Rootless && h.EUID != 0:
		return nil, fmt.Errorf("the root side runs as effective uid %d: want root", h.EUID)
	}
	r := &runner{cfg: Config{StateDir: c.StateDir, Log: s.log}, report: &Report{}, bins: map[string]string{"sandbox-server": c.ServerPath}}
	opts := local.Options{ServerPath: c.ServerPath, StateDir: c.StateDir}
	h.Protections = local.Check(ctx, opts)
	if c.Rootless {
		opts.Relax.DiskQuota = relaxIfUnavailable(h.Protections, local.ProtDiskQuota)
	}
	s.opts = opts
	var err error
	if s.pooled, err = r.newLocal(ctx, opts); err != nil {
		return nil, err
	}
	opts.WarmPool = -1
	if s.unpooled, err = r.newLocal(ctx, opts); err != nil {
		return nil, err
	}
	if s.warmSession, err = goruntime.Open(ctx, s.pooled, goruntime.Options{}); err != nil {
		return nil, err
	}
	for _, cmd := range c.Commands {
		if _, err := execOK(ctx, s.warmSession, goruntime.Request{Files: files(smallModule(-1)), Command: cmd}); err != nil {
			return nil, fmt.Errorf("warm up: %w", err)
		}
	}
	h.Notes = r.report.Notes
	return h, nil
}

// relaxIfUnavailable marks the protection named name relaxed, keeping
// why, and reports true when Check found it unavailable.
func relaxIfUnavailable(ps []local.Protection, name string) bool {
	for i, p := range ps {
		if p.Name == name && p.Status == local.StatusUnavailable {
			ps[i].Status, ps[i].Required, ps[i].Fix = local.StatusRelaxed, false, ""
			ps[i].Detail = "local.Check found it unavailable: " + p.Detail
			return true
		}
	}
	return false
}

func (s *side) settle() {
	if s.pooled != nil {
		waitPool(s.pooled)
	}
}

func (s *side) open(ctx context.Context, pool bool) (time.Duration, error) {
	if pool {
		return timeOpen(ctx, s.pooled)
	}
	return timeOpen(ctx, s.unpooled)
}

func (s *side) first(ctx context.Context, command string, code int) (time.Duration, error) {
	return firstRun(ctx, s.pooled, goruntime.Request{Files: files(smallModule(code)), Command: command})
}

func (s *side) warm(ctx context.Context, command string, code int) (time.Duration, error) {
	return execOK(ctx, s.warmSession, goruntime.Request{Files: files(smallModule(code)), Command: command})
}

func (s *side) close(ctx context.Context) error {
	var errs []error
	if s.warmSession != nil {
		errs = append(errs, s.warmSession.Close(ctx))
	}
	for _, b := range []*local.Backend{s.pooled, s.unpooled} {
		if b != nil {
			errs = append(errs, b.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// sideProc is a running side, as the parent sees it.
type sideProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	enc   *json.Encoder
	dec   *json.Decoder
}

// startSide starts bin as the side called name, in dir, with env (the
// side's marker added), under wrap (a command that ends by executing its
// arguments, bin, in its place) when set. Its stderr goes to log. When ctx
// ends the side gets SIGTERM: its request in flight fails and it closes
// its backends.
func startSide(ctx context.Context, name, bin, dir string, env []string, wrap []string, log io.Writer) (*sideProc, error) {
	cmd := exec.CommandContext(ctx, bin)
	if len(wrap) > 0 {
		cmd = exec.CommandContext(ctx, wrap[0], append(slices.Clip(wrap[1:]), bin)...)
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	cmd.Dir = dir
	cmd.Env = append(slices.Clip(env), sideEnv+"="+name)
	cmd.Stderr = log
	if log == nil {
		cmd.Stderr = io.Discard
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s side: %w", name, err)
	}
	return &sideProc{name: name, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout)}, nil
}

// call sends req and returns the side's reply; a reply with an error is
// an error naming the side.
func (p *sideProc) call(req sideRequest) (sideReply, error) {
	var rep sideReply
	if err := p.enc.Encode(req); err != nil {
		return rep, fmt.Errorf("%s side: send %s: %w", p.name, req.Op, err)
	}
	if err := p.dec.Decode(&rep); err != nil {
		return rep, fmt.Errorf("%s side: no answer to %s (it ended; its log is above): %w", p.name, req.Op, err)
	}
	if rep.Err != "" {
		return rep, fmt.Errorf("%s side: %s: %s", p.name, req.Op, rep.Err)
	}
	return rep, nil
}

// stop ends the side's input, so it closes its backends, and waits for it.
func (p *sideProc) stop() error {
	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%s side: %w", p.name, err)
	}
	return nil
}
