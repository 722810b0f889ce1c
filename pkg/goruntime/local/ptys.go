package local

import (
	"fmt"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxPtys is how many pseudo-terminals one sandbox may have open at once.
// bubblewrap gives each sandbox a devpts instance of its own, but every
// instance draws on one host-wide pool (kernel.pty.max less
// kernel.pty.reserve: 3072 by default), so without a cap one sandbox took
// them all and the next one's open("/dev/ptmx") failed. Past the cap,
// opening /dev/ptmx fails with ENOSPC in that sandbox alone.
const maxPtys = 32

// capPtys remounts the devpts instance of the sandbox whose process pid
// is inside it with max=maxPtys. It needs root: it joins the sandbox's
// mount namespace from a thread of its own, which it then leaves to end
// with its goroutine (a thread in another mount namespace must never run
// other goroutines).
func capPtys(pid int) error {
	// The options bubblewrap mounts /dev/pts with (a remount resets
	// whatever it does not name), plus the cap.
	opts := "newinstance,ptmxmode=0666,mode=620,max=" + strconv.Itoa(maxPtys)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go ends the thread when the goroutine returns
		errc <- func() error {
			// setns into a mount namespace needs a thread whose file
			// system attributes (root, cwd) are its own.
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare the thread's file system attributes: %w", err)
			}
			ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open the sandbox's mount namespace: %w", err)
			}
			defer unix.Close(ns)
			if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("join the sandbox's mount namespace: %w", err)
			}
			if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
				return fmt.Errorf("remount /dev/pts with %s: %w", opts, err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("cap the sandbox's pseudo-terminals at %d: %w", maxPtys, err)
	}
	return nil
}
