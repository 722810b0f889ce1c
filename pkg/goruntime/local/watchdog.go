package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

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

// do runs one call to the server with fn, under ctx and a client-side
// deadline: limit when > 0 (a command's), else file's (deadline.go; fn
// counts the bytes it moves with file.count). A failure that is not the
// server's answer (transport error, deadline) is diagnosed: when the
// server has exited, does not answer a readiness probe within
// probeTimeout, or let a file call pass its deadline, the sandbox is
// killed and the error wraps goruntime.ErrSandboxGone, and so does every
// later call. Errors wrapping a goruntime sentinel the server
// answered with (ErrNotExist, ErrPathEscape, ErrTooLarge, fs.ErrPermission)
// pass unchanged. A call that fails because this Sandbox was closed or
// disconnected meanwhile (from another goroutine) wraps goruntime.ErrClosed.
func (s *Sandbox) do(ctx context.Context, what string, limit time.Duration, file *callLimit, fn func(context.Context) error) error {
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
		s.watch(cctx, cancel, what, file)
	}()
	err := fn(cctx)
	cancel(nil)
	<-watched
	if err == nil || errors.Is(err, goruntime.ErrNotExist) || errors.Is(err, goruntime.ErrPathEscape) || errors.Is(err, goruntime.ErrTooLarge) || errors.Is(err, goruntime.ErrDiskFull) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	if s.closedDuring() {
		// Close (or Disconnect) cut the connection under the call; the
		// server going away is its doing, not a sign the sandbox died.
		return fmt.Errorf("%s in local sandbox %s: the sandbox was closed (Close or Disconnect) while the call ran: %w", what, s.meta.ID, goruntime.ErrClosed)
	}
	if gone := s.diagnose(ctx, context.Cause(cctx), err); gone != nil {
		return fmt.Errorf("%s in local sandbox %s: %w", what, s.meta.ID, gone)
	}
	if errors.Is(err, goruntime.ErrSandboxGone) {
		// The transport called it gone (a streamed command's connection to
		// the process API companion broke: a command can kill the companion,
		// e.g. with kill -9 -1), but the server answers: the sandbox lives.
		// Keep ErrSandboxGone out of the chain, or callers such as
		// mcp-server delete a live sandbox and its files.
		return fmt.Errorf("%s in local sandbox %s: the call's connection broke but the sandbox is still running and its files are intact (a command may have killed the process API companion that streamed it); this call's result is lost: %v", what, s.meta.ID, err)
	}
	return fmt.Errorf("%s in local sandbox %s: %w", what, s.meta.ID, err)
}

// closedDuring reports whether Close or Disconnect ran (it waits for a
// Close in progress to finish).
func (s *Sandbox) closedDuring() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// watch cancels a call when the server process is stopped or has exited
// and does not answer a readiness probe (cause errServerWedged), or when
// file, if not nil, has passed its deadline (cause wrapping
// errNoAnswer). It returns when ctx ends.
func (s *Sandbox) watch(ctx context.Context, cancel context.CancelCauseFunc, what string, file *callLimit) {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if file != nil && file.passed(now) {
				cancel(file.cause(what))
				return
			}
		}
		if st := s.serverState(); st == "running" || st == "unknown" {
			continue
		}
		if s.pingServer() != nil {
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
	st, err := procfs.ReadStat(s.meta.Server)
	if err != nil {
		return "exited"
	}
	if st.State == 'T' || st.State == 't' {
		return "stopped"
	}
	return "running"
}

// pingServer asks the server's readiness with a short timeout of its own.
func (s *Sandbox) pingServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	return s.cl.Ready(ctx)
}

// diagnose decides whether a failed call means the sandbox is gone (cause
// is the call's context cause, err its error). If so it kills what is
// left of the sandbox, records the error for later calls and returns it;
// otherwise it returns nil. A call the caller cancelled is not probed
// unless the watcher had found the server stopped.
func (s *Sandbox) diagnose(ctx context.Context, cause, err error) error {
	var why string
	switch st := s.serverState(); {
	case st == "exited":
		why = s.exitedWhy()
	case errors.Is(cause, errServerWedged):
		why = fmt.Sprintf("the runtime server stopped answering (its process is %s; a command may have sent it SIGSTOP)", st)
	case errors.Is(cause, errNoAnswer):
		// Whether or not it answers a probe: a server that holds a call
		// past its deadline cannot be trusted with the next one.
		why = "the sandbox is stuck: " + cause.Error()
	case errors.Is(ctx.Err(), context.Canceled):
		return nil
	default:
		if s.pingServer() == nil {
			return nil
		}
		if s.serverState() == "exited" {
			why = s.exitedWhy()
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
	if kerr := s.meta.Cgroup.Kill(nil); kerr != nil {
		s.b.opts.Logger.Warn("local sandbox: kill after the server stopped answering", "id", s.meta.ID, "err", kerr)
	}
	return gone
}

// exitedWhy says why a sandbox whose server exited is gone: the Go
// runtime's own last words from the server's log when it aborted (e.g.
// "runtime: failed to create new OS thread ...; fatal error: newosproc"),
// else the usual suspects.
func (s *Sandbox) exitedWhy() string {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if last := runtimeFatal(log); last != "" {
		return "the runtime server exited: " + last
	}
	return "the runtime server exited (killed by a command, or by the OOM killer)"
}

// runtimeFatal returns the lines of a Go runtime abort at the end of the
// server log f (at most three of "fatal error: ...", "panic: ...",
// "runtime/cgo: ...", "runtime: failed ...", "runtime: may need ..."),
// joined with "; ", or "" when there are none (or f is nil). It reads at
// most the last MiB: a goroutine dump follows the abort lines.
func runtimeFatal(f *os.File) string {
	data := readEnd(f, 1<<20)
	var lines []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		for _, p := range []string{"fatal error: ", "panic: ", "runtime/cgo: ", "runtime: failed ", "runtime: may need "} {
			if strings.HasPrefix(line, p) && len(lines) < 3 {
				lines = append(lines, line)
			}
		}
	}
	return strings.Join(lines, "; ")
}
