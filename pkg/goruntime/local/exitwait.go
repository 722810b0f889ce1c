package local

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// waitCmd waits for cmd, started, to exit and reaps it. os/exec's Wait
// blocks an OS thread in waitid(2) for as long as the process runs, and a
// sandbox's bubblewrap runs as long as the sandbox: 1,000 live sandboxes
// held 1,000 threads in the opening process (and as many of the host's
// tasks; Go aborts a program past 10,000). So it first waits for the
// process's pidfd to become readable, which the Go runtime's poller does
// without a thread of its own, and reaps it then. The pid cannot be
// reused meanwhile: the process is this one's child, and only this Wait
// reaps it. Where pidfds are missing (Linux before 5.3) it falls back to
// the blocking Wait.
func waitCmd(cmd *exec.Cmd) {
	if fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Read(func(fd uintptr) bool {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				n, err := unix.Poll(fds, 0)
				return err != nil || n > 0 // done, or cannot tell: Wait below
			})
		}
		f.Close()
	}
	_ = cmd.Wait()
}
