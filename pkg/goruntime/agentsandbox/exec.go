package agentsandbox

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

var _ goruntime.StreamingSandbox = (*Sandbox)(nil)

// Exec runs req.Command with /bin/sh -c in /app (or req.Dir under it).
// Outside ConnectivityRouter it speaks the pod's sandboxd ProcessService
// (see ExecStream); with it, the legacy contract through the router (see
// execLegacy). A command that exits non-zero is not an error; one killed
// by its Timeout reports TimedOut, exit code 124 and the output it made.
// req.Timeout over Options.MaxExecTimeout, bad Env names, NUL bytes and a
// Dir leaving /app (ErrPathEscape) are refused before anything runs.
func (s *Sandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	return s.ExecStream(ctx, req, nil)
}

// ExecStream is Exec, calling onChunk (from one goroutine, in order) with
// output as the command produces it. Over the process API, env, working
// directory and timeout travel as data, req.Stdin feeds the command and
// req.Signals reach it; a command longer than shell.MaxArgBytes (96 KiB)
// is passed in environment pieces, up to processclient.MaxCommandBytes
// (1.5 MiB; a longer one is refused with ErrTooLarge). The
// timeout is enforced by SIGKILL to the command's process group. Through
// the router (ConnectivityRouter, Gateway mode) output arrives whole at
// the end and Stdin, Signals and Dir are refused.
func (s *Sandbox) ExecStream(ctx context.Context, req goruntime.ExecRequest, onChunk func(goruntime.Chunk)) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", s.id, err)
	}
	if limit := s.b.opts.MaxExecTimeout; req.Timeout > limit {
		return nil, fmt.Errorf("exec timeout %s is over this backend's limit %s (Options.MaxExecTimeout)", req.Timeout, limit)
	}
	if s.proc == nil {
		return goruntime.ExecWhole(ctx, legacySandbox{s}, req, onChunk)
	}
	conn, _, err := s.proc.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", s.id, err)
	}
	// Bound the whole call, so a pod that stops answering (or whose
	// server a command replaced) cannot hang it: the command's timeout
	// (processclient's default without one) plus execGrace.
	limit := processclient.DefaultExecTimeout
	if req.Timeout > 0 {
		limit = req.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, limit+execGrace)
	defer cancel()
	res, err := processclient.Exec(ctx, processv1.NewProcessServiceClient(conn), req, processclient.ExecOptions{}, onChunk)
	if err != nil {
		return nil, s.explainRPC(err)
	}
	return res, nil
}

// explainRPC maps a process API failure to our sentinels: a working
// directory that is missing (NotFound) or outside /app (PermissionDenied).
// An unreachable server over a port-forward gets a hint: gVisor (runsc)
// pods refuse port-forwards (google/gvisor#3811), so their commands need
// another Connectivity.
func (s *Sandbox) explainRPC(err error) error {
	err = fmt.Errorf("exec in sandbox %s: %w", s.id, err)
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w: %w", goruntime.ErrNotExist, err)
	case codes.PermissionDenied:
		return fmt.Errorf("%w: %w", goruntime.ErrPathEscape, err)
	case codes.Unavailable:
		if s.b.opts.Connectivity == ConnectivityPortForward {
			return fmt.Errorf("%w (over a port-forward to the pod; if its template uses gVisor (runtimeClassName gvisor), port-forwards into runsc pods fail: set Options.Connectivity=%s from inside the cluster, or %s)",
				err, ConnectivityInClusterPodIP, ConnectivityRouter)
		}
	}
	return err
}

// legacySandbox is the sandbox with Exec going through the router, for
// goruntime.ExecWhole.
type legacySandbox struct{ *Sandbox }

func (l legacySandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	return l.execLegacy(ctx, req)
}

// callTimeout is the SDK call option bounding a legacy Run.
func callTimeout(timeout time.Duration) []sandbox.CallOption {
	if timeout <= 0 {
		return nil
	}
	return []sandbox.CallOption{sandbox.WithTimeout(timeout + execGrace)}
}
