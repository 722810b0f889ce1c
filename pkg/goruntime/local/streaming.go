package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"

	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// grpcSocketName is the sandboxd ProcessService socket the server serves
// next to its HTTP socket (sandbox-server --grpc-addr, docs/sandboxd.md).
const grpcSocketName = "sandboxd.sock"

// processConn is one sandbox's gRPC client connection, dialled on first
// use and reused by every ExecStream until the sandbox is closed or
// disconnected (a new connection per call cost 4-6 ms).
type processConn struct {
	mu   sync.Mutex
	conn *grpc.ClientConn
}

func (p *processConn) get(dial func(context.Context) (net.Conn, error)) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		conn, err := processclient.DialFunc(dial)
		if err != nil {
			return nil, err
		}
		p.conn = conn
	}
	return p.conn, nil
}

func (p *processConn) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}

var _ goruntime.StreamingSandbox = (*Sandbox)(nil)

// ExecStream is Exec, calling onChunk with output as the command produces
// it (see goruntime.StreamingSandbox). It speaks the sandboxd
// ProcessService over the sandbox's gRPC socket; a sandbox whose server
// has no such socket (opened by an older version and reattached) runs the
// command with Exec and passes its whole output to onChunk at the end.
// A command the process API cannot carry also runs with Exec: one over
// processclient.MaxCommandBytes (1.5 MiB; processclient passes a command
// over one argument's limit, shell.MaxArgBytes, in environment pieces,
// and Linux caps all of them at 2 MiB together), which the server's
// /execute runs from a script file; its output, too, reaches onChunk at
// the end, and it cannot carry Stdin, Signals or Dir.
// Errors are Exec's.
func (s *Sandbox) ExecStream(ctx context.Context, req goruntime.ExecRequest, onChunk func(goruntime.Chunk)) (*goruntime.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("execute in local sandbox %s: %w", s.meta.ID, err)
	}
	s.commandEvent(true)
	defer s.commandEvent(false)
	if _, err := os.Lstat(s.l.grpcSocket()); err != nil || len(req.Command) > processclient.MaxCommandBytes {
		return goruntime.ExecWhole(ctx, contractSandbox{s}, req, onChunk)
	}
	conn, err := s.proc.get(func(ctx context.Context) (net.Conn, error) {
		return dialSandboxSocket(ctx, s.l.grpcSocket(), serverUID(s.meta.HostUID))
	})
	if err != nil {
		return nil, fmt.Errorf("execute in local sandbox %s: %w", s.meta.ID, err)
	}

	lw := s.watchLimits()
	defer lw.end()
	var res *goruntime.ExecResult
	err = s.do(ctx, "execute", s.execLimit(req), nil, func(ctx context.Context) error {
		var err error
		res, err = processclient.Exec(ctx, processv1.NewProcessServiceClient(conn), req, processclient.ExecOptions{
			DefaultTimeout: s.b.opts.ExecTimeout,
			MaxOutput:      int(min(s.b.opts.OutputBytes, int64(maxInt()))),
		}, onChunk)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.finishExec(ctx, lw, res)
	return res, nil
}

// contractSandbox is the sandbox with Exec going straight to /execute
// (the request validated already), for goruntime.ExecWhole.
type contractSandbox struct{ *Sandbox }

func (c contractSandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	return c.execContract(ctx, req)
}

func maxInt() int { return int(^uint(0) >> 1) }
