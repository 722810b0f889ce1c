package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// reapInterval bounds how long a zombie can wait if a SIGCHLD was missed.
const reapInterval = 5 * time.Second

// reaper collects orphaned descendants that the kernel re-parents to this
// process (PID 1 in a container, or a child subreaper) and that would
// otherwise stay zombies.
//
// It never waits for a child that os/exec started and still owes a Wait
// for: such children are started under startMu held shared and recorded
// in tracked before the lock is released, while a reaping pass holds
// startMu exclusively, lists this process's children from
// /proc/self/task/*/children and waits (WNOHANG) only for the untracked
// ones. A child is forgotten only after cmd.Wait returned, so no pass can
// see a tracked child as an orphan.
type reaper struct {
	log     *slog.Logger
	startMu sync.RWMutex

	mu      sync.Mutex
	tracked map[int]struct{}
}

func newReaper(log *slog.Logger) *reaper {
	return &reaper{log: log, tracked: make(map[int]struct{})}
}

// Start starts cmd and records its pid.
func (r *reaper) Start(cmd *exec.Cmd) error {
	r.startMu.RLock()
	defer r.startMu.RUnlock()
	if err := startHanding(cmd); err != nil {
		return err
	}
	r.mu.Lock()
	r.tracked[cmd.Process.Pid] = struct{}{}
	r.mu.Unlock()
	return nil
}

// Done forgets pid; call it after cmd.Wait returned.
func (r *reaper) Done(pid int) {
	r.mu.Lock()
	delete(r.tracked, pid)
	r.mu.Unlock()
}

// enable makes this process a child subreaper unless it is PID 1, which
// inherits orphans already.
func (r *reaper) enable() error {
	if os.Getpid() == 1 {
		return nil
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// reapDelay is how long a SIGCHLD waits before the reaping pass it
// triggers. Most SIGCHLDs are for commands os/exec is about to Wait for;
// by then it has, the pass finds no zombie with one waitid call, and it
// never holds up the request that ran the command (a pass blocks starts).
const reapDelay = 50 * time.Millisecond

// run reaps after every SIGCHLD (by reapDelay; SIGCHLDs in between are
// one pass) and every reapInterval, until ctx is done.
func (r *reaper) run(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			select {
			case <-ctx.Done():
				return
			case <-time.After(reapDelay):
			}
			select { // the SIGCHLDs of the delay belong to this pass
			case <-sig:
			default:
			}
		case <-tick.C:
		}
		if r.zombie() {
			r.reapOnce()
		}
	}
}

// zombie reports whether any child of this process has exited and waits
// to be reaped (waitid with WNOWAIT leaves it in place), or when that
// cannot be told. Then reapOnce does the full pass.
func (r *reaper) zombie() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	switch {
	case errors.Is(err, unix.ECHILD):
		return false // no children at all
	case err != nil:
		return true
	}
	// Linux writes si_signo: SIGCHLD for a waiting child, 0 for none.
	return info.Signo != 0
}

// reapOnce waits for every untracked child that has exited and returns
// how many it reaped.
func (r *reaper) reapOnce() int {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	pids, err := children()
	if err != nil {
		r.log.Warn("list children for reaping", "err", err)
		return 0
	}
	n := 0
	for _, pid := range pids {
		r.mu.Lock()
		_, mine := r.tracked[pid]
		r.mu.Unlock()
		if mine {
			continue
		}
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err != nil && !errors.Is(err, syscall.ECHILD) {
			r.log.Warn("reap orphan", "pid", pid, "err", err)
		}
		if got == pid {
			n++
			r.log.Debug("reaped orphan", "pid", pid, "exit_code", ws.ExitStatus())
		}
	}
	return n
}

// children lists the pids of this process's children, from every thread's
// /proc children file (orphans can be re-parented to any thread).
func children() ([]int, error) {
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, fmt.Errorf("glob /proc/self/task/*/children: %w", err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// plainStarter starts commands without reaping orphans.
type plainStarter struct{}

func (plainStarter) Start(cmd *exec.Cmd) error { return startHanding(cmd) }
func (plainStarter) Done(int)                  {}
