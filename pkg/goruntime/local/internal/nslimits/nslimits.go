// Package nslimits sets the limits the host puts in a local sandbox's own
// mount namespace right after it starts, before any command runs: its
// devpts instance, which bubblewrap mounts (CapPtys). The sandbox cannot
// change it: it has no capabilities, and the seccomp filter refuses
// mount. (Its network namespace comes with its limits already in it: the
// gate makes it, internal/gate.) It is also the backend's one way into a
// sandbox's namespaces for other work: SandboxCommand (command.go) runs a
// command as the sandbox's own processes run, for the snapshots' copies.
package nslimits

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// maxPtys caps the pseudo-terminals one sandbox holds at once. The kernel
// counts every devpts instance's ptys against one host-wide limit
// (kernel.pty.max, 4096 by default, of which instances other than the
// host's may use all but kernel.pty.reserve, 1024), so without a cap one
// sandbox could take every pty other sandboxes may have. Past the cap,
// opening /dev/ptmx fails with ENOSPC in that sandbox alone.
const maxPtys = 32

// ptyOptions are the options bubblewrap mounts /dev/pts with (a remount
// resets whatever it does not name), plus the cap.
var ptyOptions = "remount,newinstance,ptmxmode=0666,mode=620,max=" + strconv.Itoa(maxPtys)

// CapPtys remounts the devpts instance of the sandbox whose process pid
// is inside it with max=maxPtys: mount(8) under nsenter(1), in the
// sandbox's mount namespace only (not its pid namespace, so no host
// process ever shows inside). Joining the namespace from this process
// instead would need a thread of its own, and Go cannot always give one
// back: a goroutine that ends locked on the main thread leaves that
// thread, and with it /proc/self, in the sandbox's mounts for the life of
// the process.
func CapPtys(ctx context.Context, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := run(ctx, pid, "mnt", "mount", "-n", "-t", "devpts", "-o", ptyOptions, "devpts", "/dev/pts")
	if err != nil {
		return fmt.Errorf("cap the sandbox's pseudo-terminals at %d (nsenter, mount -o %s /dev/pts): %w: %s", maxPtys, ptyOptions, err, out)
	}
	return nil
}

// toolPath is the PATH nsenter and mount run with.
const toolPath = "/usr/sbin:/sbin:/usr/bin:/bin"
