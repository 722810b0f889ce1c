// Package procgroup runs a host command in a process group of its own, so
// that ending the command ends everything it started, and so that none of
// it outlives this process. The go command is the reason: killing it
// leaves its compile, cgo and gcc children running, still writing into
// the caches and temporary directories their caller is about to remove;
// and a go command started by a process that was killed (kill -9 of
// mcp-server during its background seed build) went on building for
// about a minute.
package procgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// waitDelay bounds how long Wait waits for the command's output pipes
// after the command itself has exited, and how long Run waits for the
// rest of its group to go.
const waitDelay = 5 * time.Second

// Run runs cmd, made by exec.CommandContext and not yet started, in a new
// process group and, once it has exited, kills whatever of its group is
// still running and waits until none of it is left, so nothing it started
// outlives the call. A group still there after waitDelay is an error
// joined to the command's own.
//
// The group goes with it when cmd's context ends (the whole group is
// killed), and when this process ends, however it ends: the command has
// the parent-death signal SIGKILL, and a guard in its group (guard) kills
// what the command started. The guard starts first and leads the group,
// and the command joins it: a process killed just after the command
// started (before, the guard started second: on a busy machine the
// command had started its children by then) leaves nothing running.
func Run(cmd *exec.Cmd) error {
	g, err := startGuard()
	if err != nil {
		// Unguarded, its children could outlive us: do not run it.
		return fmt.Errorf("guard a process group: %w", err)
	}
	defer g.stop()
	pgid := g.cmd.Process.Pid
	bind(cmd, pgid)
	// The kernel sends the parent-death signal when the thread that
	// forked the command ends, not the process (prctl(2),
	// PR_SET_PDEATHSIG), and the Go runtime ends a thread whose goroutine
	// exits locked to it: hold this thread until the command is waited
	// for, so no other goroutine can end it under the command.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	err = cmd.Wait()
	if rerr := reap(pgid, waitDelay); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// bind puts cmd in process group pgid, killed by SIGKILL when this
// process's thread that starts it ends (Run holds it), and makes the end
// of its context kill that whole group.
func bind(cmd *exec.Cmd, pgid int) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = pgid
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Cancel = func() error { return syscall.Kill(-pgid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
}

// guardScript kills its own process group once its stdin reaches end of
// file. Its stdin is a pipe whose only write end this process holds
// (close-on-exec, so no other child inherits it): the kernel closes it
// when this process ends, however it ends.
const guardScript = "read x; kill -9 0"

// guard is a shell leading a command's process group that kills the
// group when this process ends: the parent-death signal reaches only the
// command itself, not the processes it started (the go command's
// compiles, gcc, test binaries, git), which would otherwise run on.
type guard struct {
	cmd   *exec.Cmd
	alive *os.File // the pipe's write end
}

// startGuard starts a guard in a new process group of its own, for the
// command to join.
func startGuard() (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, alive: w}, nil
}

// stop ends the guard (reap killed it with its group; closing the pipe
// ends one that is somehow still reading) and waits for it.
func (g *guard) stop() {
	g.alive.Close()
	_ = g.cmd.Wait()
}

// reap kills the process group pgid and waits until none of it runs:
// every member has exited (a zombie left for whoever adopted it, often a
// slow init, is done writing).
func reap(pgid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		running, err := procfs.GroupRunning(pgid)
		if err != nil {
			return fmt.Errorf("process group %d: %w", pgid, err)
		}
		if !running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still runs %s after its leader exited", pgid, limit)
		}
		time.Sleep(wait)
	}
}
