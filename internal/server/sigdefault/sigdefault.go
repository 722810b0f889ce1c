// Package sigdefault makes the programs a process starts begin with every
// signal at its default disposition, whatever dispositions the process
// itself inherited.
//
// Whoever starts a process may hand it signals ignored (SIG_IGN): nohup
// ignores SIGHUP, a shell ignores SIGINT and SIGQUIT for a background job,
// a supervisor or a shell's empty trap ignores whatever it likes. execve keeps
// an ignored signal ignored and resets only caught ones to the default.
// The Go runtime catches most signals at start, so those reach exec'd
// children as defaults, but it leaves an inherited SIG_IGN in place for
// SIGHUP and SIGINT (and never touches SIGTSTP, SIGTTIN, SIGTTOU), so
// os/exec passes those on as ignored. signal.Reset and signal.Stop do not
// help: they put the inherited SIG_IGN back. What does is an active
// signal.Notify: while it lasts, the runtime catches the signal, and a
// caught signal starts at its default in every exec'd program.
//
// Signals 32 and 33 are out of reach: the C library's own (glibc's
// cancellation and set*id signals), for which Go never installs a
// handler. They stay as inherited; GNU make 4.3, for one, starts its
// recipes with both ignored. That is harmless: the C libraries install
// their own handlers for them when they need them, and no program uses
// them otherwise (SIGRTMIN is 34 or above).
package sigdefault

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// ForChildren takes over every signal this process ignores right now (as
// /proc/self/status shows it) that Go can catch: while ctx lasts, the
// process catches and drops it (logged at debug level), so it still
// ignores the signal itself, and the programs it execs start with it at
// its default disposition. It returns the signals it took over, and
// those it could not (32 and 33, see the package comment; they stay
// ignored for children). Call it before starting any command.
func ForChildren(ctx context.Context, log *slog.Logger) (taken, left []syscall.Signal, err error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, nil, fmt.Errorf("read the ignored signals: %w", err)
	}
	mask, err := ignoredMask(string(status))
	if err != nil {
		return nil, nil, fmt.Errorf("read the ignored signals: %w", err)
	}
	var sigs []os.Signal
	for n := 1; n <= 64; n++ {
		if mask&(1<<(n-1)) == 0 {
			continue
		}
		s := syscall.Signal(n)
		if n == 32 || n == 33 {
			left = append(left, s)
			continue
		}
		taken = append(taken, s)
		sigs = append(sigs, s)
	}
	if len(sigs) == 0 {
		return taken, left, nil
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, sigs...)
	go func() {
		defer signal.Stop(c)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-c:
				log.Debug("signal ignored (inherited as ignored)", "signal", s.String())
			}
		}
	}()
	return taken, left, nil
}

// ignoredMask parses the SigIgn line of a /proc/<pid>/status text: bit
// n-1 set means signal n is ignored.
func ignoredMask(status string) (uint64, error) {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("SigIgn %q: %w", strings.TrimSpace(v), err)
			}
			return m, nil
		}
	}
	return 0, fmt.Errorf("no SigIgn line in /proc/self/status")
}
