package processclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Dial returns a gRPC connection to a ProcessService at addr ("host:port"
// or "unix:/path/to.sock"), in plain text (the API is reached over a
// loopback address or a unix socket). The connection is made lazily, on
// the first call.
func Dial(addr string) (*grpc.ClientConn, error) {
	target := addr
	if !strings.HasPrefix(addr, "unix:") {
		target = "passthrough:///" + addr
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial sandboxd %s: %w", addr, err)
	}
	return conn, nil
}

// DialFunc is Dial for a connection the caller makes: every transport
// connection comes from dial (for one, a unix socket the caller checks
// before it connects). Plain text and lazy, like Dial.
func DialFunc(dial func(context.Context) (net.Conn, error)) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("passthrough:///sandboxd", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }))
	if err != nil {
		return nil, fmt.Errorf("dial sandboxd: %w", err)
	}
	return conn, nil
}

// ExecOptions tunes Exec.
type ExecOptions struct {
	// DefaultTimeout applies when the request has none. Zero means
	// DefaultExecTimeout.
	DefaultTimeout time.Duration
	// MaxOutput caps each stream, in bytes, in the result and in what is
	// passed to onChunk; the rest is dropped and the Truncated flag set.
	// Zero means 8 MiB.
	MaxOutput int
}

// DefaultExecTimeout is a command's timeout when neither the request nor
// ExecOptions gives one.
const DefaultExecTimeout = 300 * time.Second

const (
	defaultMaxOutput = 8 << 20
	// killTimeout bounds the SendSignal call made when a command times out.
	killTimeout = 10 * time.Second
)

// Exec runs req.Command (checked by the caller: ExecRequest.Validate) with
// /bin/sh -c over ProcessService.Start and calls
// onChunk (may be nil) with each piece of output as it arrives, on the
// calling goroutine, in order. Stdin is closed at once. When the timeout
// passes, the command's process group is SIGKILLed and the result has
// TimedOut set and exit code 124. A command that exits non-zero is not an
// error. Errors: the stream broke before the exit event (wrapping
// goruntime.ErrSandboxGone when the server is unreachable), or ctx ended
// (the server then kills the command's process group).
func Exec(ctx context.Context, client processv1.ProcessServiceClient, req goruntime.ExecRequest, opts ExecOptions, onChunk func(goruntime.Chunk)) (*goruntime.ExecResult, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = opts.DefaultTimeout
	}
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	limit := opts.MaxOutput
	if limit <= 0 {
		limit = defaultMaxOutput
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfg, err := processConfig(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	stream, err := client.Start(ctx, &processv1.StartRequest{Config: cfg})
	if err != nil {
		return nil, rpcError("start", err)
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, rpcError("start", err)
	}
	if first.GetInit() == nil {
		return nil, fmt.Errorf("sandboxd start: first event is %T, want an init event", first.GetEvent())
	}
	pid := first.GetInit().GetProcessId()
	if req.Stdin == nil {
		// Nothing feeds stdin: close it so commands that read it see EOF.
		// The process may already be gone (NotFound), which is fine.
		if err := closeStdin(ctx, client, pid); err != nil {
			return nil, err
		}
	} else {
		go feedStdin(ctx, client, pid, req.Stdin)
	}
	if req.Signals != nil {
		go forwardSignals(ctx, client, pid, req.Signals)
	}

	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		kctx, kcancel := context.WithTimeout(ctx, killTimeout)
		defer kcancel()
		_, _ = client.SendSignal(kctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: processv1.Signal_SIGNAL_SIGKILL})
	})
	defer timer.Stop()

	res := &goruntime.ExecResult{}
	var stdout, stderr []byte
	keep := func(buf []byte, data []byte, truncated *bool, s goruntime.Stream) []byte {
		room := limit - len(buf)
		if room <= 0 {
			*truncated = true
			return buf
		}
		if len(data) > room {
			data = data[:room]
			*truncated = true
		}
		if onChunk != nil {
			onChunk(goruntime.Chunk{Stream: s, Data: data})
		}
		return append(buf, data...)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("stream ended without an exit event")
			}
			return nil, rpcError("stream output", err)
		}
		switch e := ev.GetEvent().(type) {
		case *processv1.StartResponse_Stdout:
			stdout = keep(stdout, e.Stdout, &res.StdoutTruncated, goruntime.Stdout)
		case *processv1.StartResponse_Stderr:
			stderr = keep(stderr, e.Stderr, &res.StderrTruncated, goruntime.Stderr)
		case *processv1.StartResponse_Exit:
			timer.Stop()
			res.Duration = time.Since(start)
			res.ExitCode = int(e.Exit.GetExitCode())
			if timedOut.Load() {
				res.TimedOut = true
				res.ExitCode = wire.ExitTimedOut
			}
			if res.StdoutTruncated || res.StderrTruncated {
				res.Limit = goruntime.LimitOutput
			}
			// Bad bytes read as in an /execute answer: one U+FFFD each.
			res.Stdout = wire.ValidUTF8(string(stdout))
			res.Stderr = wire.ValidUTF8(string(stderr))
			return res, nil
		}
	}
}

// rpcError wraps a gRPC failure with what failed; an unreachable server
// also matches goruntime.ErrSandboxGone.
func rpcError(what string, err error) error {
	if status.Code(err) == codes.Unavailable {
		return fmt.Errorf("sandboxd %s: %w: %w", what, goruntime.ErrSandboxGone, err)
	}
	if s, ok := status.FromError(err); ok && (s.Code() == codes.Canceled || s.Code() == codes.DeadlineExceeded) {
		// Prefer the context's own error so errors.Is(err, context.Canceled) works.
		if s.Code() == codes.Canceled {
			return fmt.Errorf("sandboxd %s: %w", what, context.Canceled)
		}
		return fmt.Errorf("sandboxd %s: %w", what, context.DeadlineExceeded)
	}
	return fmt.Errorf("sandboxd %s: %w", what, err)
}
