package local

// How a start waits for its runtime server's answer, and what it says
// when the sandbox ended first.

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// waitReady polls the server until it answers, bubblewrap exits, or
// timeout passes: every millisecond for the first 100 ms (a quiet
// host's start answers in ~20–30 ms, and every millisecond of a late
// look is one the caller waits; at most startSlots starts poll at once),
// then every 10 ms.
func (o *opening) waitReady(timeout time.Duration) error {
	s := o.s
	ctx, cancel := context.WithTimeout(o.ctx, timeout)
	defer cancel()
	start := time.Now()
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
		case <-o.exited:
			return o.exitedEarly("")
		case <-ctx.Done():
			hint := ""
			if s.b.host.childMode {
				hint = " (is local.ServeIfChild() the first call in main?)"
			}
			return fmt.Errorf("local backend: runtime server did not answer within %v%s; log: %s: %w",
				timeout, hint, tail(s.log, 1500), ctx.Err())
		case <-time.After(readyPoll(time.Since(start))):
		}
	}
}

// readyPoll is how long waitReady waits before it looks again, after
// looking for elapsed.
func readyPoll(elapsed time.Duration) time.Duration {
	if elapsed < 100*time.Millisecond {
		return time.Millisecond
	}
	return 10 * time.Millisecond
}

// exitedEarly is the error for a sandbox whose processes ended before its
// runtime server answered, with the end of its log; why (if any) says
// which step saw it.
func (o *opening) exitedEarly(why string) error {
	b := o.b
	hint := ""
	if b.host.childMode {
		hint = fmt.Sprintf(" (the server is this program, %s, re-executed: its main must call local.ServeIfChild() first thing, or set Options.ServerPath / $GORUNTIME_SANDBOX_SERVER to a sandbox-server binary)", b.host.server)
	}
	return fmt.Errorf("local backend: sandbox exited before its runtime server answered%s%s; log: %s: %w",
		why, hint, tail(o.logr, 1500), goruntime.ErrUnavailable)
}

// gateEnded reports, after a step of the start failed, whether the reason
// is that the gate itself has ended: the server binary starts as the gate
// and waits for its release, so one that is not a sandbox-server binary
// (or one that crashed) ends before the cgroup or the id mapping can take
// it. It returns nil while the gate still runs.
func (o *opening) gateEnded() error {
	select {
	case <-o.exited:
	case <-time.After(500 * time.Millisecond): // one that is gone is reaped at once (waitCmd)
		return nil
	}
	return o.exitedEarly(fmt.Sprintf(": its first process, %s started as the gate, ended (%v) before its release, which a sandbox-server binary waits for", o.b.host.server, o.cmd.ProcessState))
}
