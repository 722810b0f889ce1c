package processapi

import (
	"context"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/agent-sandbox/packages/sandboxd/pkg/processmanager"
	"sigs.k8s.io/agent-sandbox/packages/sandboxd/pkg/server"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cloexec"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// processService is upstream's ProcessServer with these changes:
//   - a Start stream whose client goes away (cancel, deadline, broken
//     connection) SIGKILLs the command's whole process group, not only the
//     direct child (upstream's exec.CommandContext kills the leader and
//     leaves its children running);
//   - an exit by signal N is reported as exit code 128+N, as a shell does,
//     instead of -1;
//   - Execute runs through Start, so it gets both of the above, is
//     registered (shutdown reaches it) and its stdin is closed at once;
//   - Config.Env is merged under each request's env_vars.
//
// WriteStdin, SendSignal and ResizeTTY are upstream's, unchanged.
type processService struct {
	*server.ProcessServer
	registry *processmanager.ProcessRegistry
	env      map[string]string
	children ChildTracker // may be nil
	observer Observer     // may be nil

	// active counts Start calls in progress, so shutdown can stop waiting
	// as soon as the last command is gone.
	mu     sync.Mutex
	active int
	idle   chan struct{} // closed and replaced whenever active drops to 0
}

func newProcessService(rootDir string, chunk int, env map[string]string, children ChildTracker, observer Observer, log logr.Logger) *processService {
	reg := processmanager.NewProcessRegistry()
	return &processService{
		ProcessServer: server.NewProcessServer(rootDir, reg, chunk, log),
		registry:      reg,
		env:           env,
		children:      children,
		observer:      observer,
		idle:          make(chan struct{}),
	}
}

// Start runs a command and streams its output, then its exit.
func (p *processService) Start(req *processv1.StartRequest, stream processv1.ProcessService_StartServer) error {
	return p.start(req, stream, nil)
}

// WriteStdin is upstream's, counting the bytes for Config.Observer.
func (p *processService) WriteStdin(ctx context.Context, req *processv1.WriteStdinRequest) (*processv1.WriteStdinResponse, error) {
	if p.observer != nil {
		p.observer.StdinBytes(int64(len(req.GetInput())))
	}
	return p.ProcessServer.WriteStdin(ctx, req)
}

// Execute runs a command to completion and returns its buffered output.
func (p *processService) Execute(ctx context.Context, req *processv1.ExecuteRequest) (*processv1.ExecuteResponse, error) {
	c := &collectStream{ctx: ctx}
	sreq := &processv1.StartRequest{Config: req.GetConfig()}
	closeStdin := func(proc *processmanager.ManagedProcess) { _ = proc.CloseStdin() }
	if err := p.start(sreq, c, closeStdin); err != nil {
		return nil, err
	}
	return &processv1.ExecuteResponse{ExitCode: c.exitCode, Stdout: c.stdout, Stderr: c.stderr}, nil
}

func (p *processService) start(req *processv1.StartRequest, stream processv1.ProcessService_StartServer, onInit func(*processmanager.ManagedProcess)) error {
	p.enter()
	defer p.leave()
	w := &watchedStream{
		ProcessService_StartServer: stream,
		registry:                   p.registry,
		onInit:                     onInit,
		stop:                       make(chan struct{}),
	}
	defer close(w.stop)
	if p.observer != nil {
		ended := p.observer.CommandStarted()
		defer func() { ended(int(w.exitCode), w.exited, w.outBytes) }()
	}
	if p.children != nil {
		// Upstream starts the child and registers it before it sends the
		// InitEvent, so the pid is known by the first Send.
		var once sync.Once
		started := p.children.Starting()
		pid := 0
		w.onStarted = func(proc *processmanager.ManagedProcess) {
			once.Do(func() {
				if proc != nil && proc.Cmd != nil && proc.Cmd.Process != nil {
					pid = proc.Cmd.Process.Pid
				}
				started(pid)
			})
		}
		defer func() {
			w.onStarted(nil) // nothing started, or InitEvent never sent
			if pid > 0 {
				p.children.Exited(pid)
			}
		}()
	}
	// The command gets its standard streams and nothing else this process
	// holds (internal/cloexec).
	if err := cloexec.Except(); err != nil {
		return status.Errorf(codes.Internal, "start the command with only its own descriptors: %v", err)
	}
	return p.ProcessServer.Start(p.withEnv(req), w)
}

// withEnv returns req with Config.Env merged under its env_vars.
func (p *processService) withEnv(req *processv1.StartRequest) *processv1.StartRequest {
	if len(p.env) == 0 || req.GetConfig() == nil {
		return req
	}
	out, _ := proto.Clone(req).(*processv1.StartRequest)
	merged := make(map[string]string, len(p.env)+len(out.Config.EnvVars))
	for k, v := range p.env {
		merged[k] = v
	}
	for k, v := range out.Config.EnvVars {
		merged[k] = v
	}
	out.Config.EnvVars = merged
	return out
}

func (p *processService) enter() {
	p.mu.Lock()
	p.active++
	p.mu.Unlock()
}

func (p *processService) leave() {
	p.mu.Lock()
	p.active--
	if p.active == 0 {
		close(p.idle)
		p.idle = make(chan struct{})
	}
	p.mu.Unlock()
}

// stopAll sends SIGTERM to every running command's process group, waits
// until all have ended or grace passes (or ctx ends), then SIGKILLs what is
// left.
func (p *processService) stopAll(ctx context.Context, grace context.Context) {
	p.mu.Lock()
	n, idle := p.active, p.idle
	p.mu.Unlock()
	if n == 0 {
		return
	}
	p.registry.SignalAll(syscall.SIGTERM)
	select {
	case <-idle:
	case <-grace.Done():
	case <-ctx.Done():
	}
	p.registry.SignalAll(syscall.SIGKILL)
}

// watchedStream sits between upstream's Start and the client's stream. It
// learns the process from the InitEvent, kills its process group if the
// client goes away first, and rewrites a signal death's exit code.
type watchedStream struct {
	processv1.ProcessService_StartServer
	registry *processmanager.ProcessRegistry
	onInit   func(*processmanager.ManagedProcess)
	// onStarted, if set, is called first on InitEvent (or with nil when
	// the process is not found).
	onStarted func(*processmanager.ManagedProcess)
	stop      chan struct{} // closed when Start returns
	proc      *processmanager.ManagedProcess
	// What the command did, for Config.Observer; Send runs on one goroutine.
	exited   bool
	exitCode int32
	outBytes int64
}

func (w *watchedStream) Send(ev *processv1.StartResponse) error {
	switch e := ev.GetEvent().(type) {
	case *processv1.StartResponse_Init:
		// Upstream registers the process before sending InitEvent.
		proc, ok := w.registry.Get(e.Init.GetProcessId())
		if w.onStarted != nil {
			w.onStarted(proc)
		}
		if ok {
			w.proc = proc
			if w.onInit != nil {
				w.onInit(proc)
			}
			go w.killOnHangup(proc)
		}
	case *processv1.StartResponse_Exit:
		if code, ok := signalExitCode(w.proc); ok && e.Exit.GetExitCode() == -1 {
			ev = &processv1.StartResponse{Event: &processv1.StartResponse_Exit{
				Exit: &processv1.ExitEvent{ExitCode: code},
			}}
		}
		w.exited, w.exitCode = true, ev.GetExit().GetExitCode()
	case *processv1.StartResponse_Stdout:
		w.outBytes += int64(len(e.Stdout))
	case *processv1.StartResponse_Stderr:
		w.outBytes += int64(len(e.Stderr))
	}
	return w.ProcessService_StartServer.Send(ev)
}

func (w *watchedStream) killOnHangup(proc *processmanager.ManagedProcess) {
	select {
	case <-w.Context().Done():
		// Signal is a no-op once the process is recorded as exited.
		_ = proc.Signal(syscall.SIGKILL)
	case <-proc.Done:
	case <-w.stop:
	}
}

// signalExitCode returns 128+N when proc was ended by signal N.
func signalExitCode(proc *processmanager.ManagedProcess) (int32, bool) {
	if proc == nil || proc.Cmd == nil || proc.Cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := proc.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int32(wire.SignalExitCode(int(ws.Signal()))), true
}

// collectStream is an in-process Start stream that buffers the events of
// one command for Execute.
type collectStream struct {
	ctx            context.Context
	stdout, stderr []byte
	exitCode       int32
}

func (c *collectStream) Send(ev *processv1.StartResponse) error {
	switch e := ev.GetEvent().(type) {
	case *processv1.StartResponse_Stdout:
		c.stdout = append(c.stdout, e.Stdout...)
	case *processv1.StartResponse_Stderr:
		c.stderr = append(c.stderr, e.Stderr...)
	case *processv1.StartResponse_Exit:
		c.exitCode = e.Exit.GetExitCode()
	}
	return nil
}

func (c *collectStream) Context() context.Context     { return c.ctx }
func (c *collectStream) SetHeader(metadata.MD) error  { return nil }
func (c *collectStream) SendHeader(metadata.MD) error { return nil }
func (c *collectStream) SetTrailer(metadata.MD)       {}
func (c *collectStream) SendMsg(m any) error {
	if ev, ok := m.(*processv1.StartResponse); ok {
		return c.Send(ev)
	}
	return nil
}
func (c *collectStream) RecvMsg(any) error { return nil }
