// Package procgroup runs a host command in a process group of its own, so
// that ending the command ends everything it started. The go command is
// the reason: killing it leaves its compile, cgo and gcc children running,
// still writing into the caches and temporary directories their caller is
// about to remove.
package procgroup

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// waitDelay bounds how long Wait waits for the command's output pipes
// after the command itself has exited, and how long Run waits for the
// rest of its group to go.
const waitDelay = 5 * time.Second

// Bind makes cmd, made by exec.CommandContext and not yet started, the
// leader of a new process group and makes the end of its context kill
// that whole group. Use Run to also wait for what the command left behind.
func Bind(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
}

// Run binds cmd, runs it and, once it has exited, kills whatever of its
// group is still running and waits until none of it is left, so nothing
// it started outlives the call. A group still there after waitDelay is
// an error joined to the command's own.
func Run(cmd *exec.Cmd) error {
	Bind(cmd)
	err := cmd.Run()
	if cmd.Process == nil {
		return err
	}
	if rerr := reap(cmd.Process.Pid, waitDelay); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
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
