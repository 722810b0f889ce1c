package local

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// maxPtys is how many pseudo-terminals one sandbox may have open at once.
// bubblewrap gives each sandbox a devpts instance of its own, but every
// instance draws on one host-wide pool (kernel.pty.max less
// kernel.pty.reserve: 3072 by default), so without a cap one sandbox took
// them all and the next one's open("/dev/ptmx") failed. Past the cap,
// opening /dev/ptmx fails with ENOSPC in that sandbox alone.
const maxPtys = 32

// capPtys remounts the devpts instance of the sandbox whose process pid
// is inside it with max=maxPtys. It needs root.
//
// It runs mount(8) under nsenter(1), in the sandbox's mount namespace
// only (not its pid namespace, so no host process ever shows inside).
// Joining the namespace from this process instead would need a thread of
// its own, and Go cannot always give one back: a goroutine that ends
// locked on the main thread leaves that thread, and with it /proc/self,
// in the sandbox's mounts for the life of the process.
func capPtys(ctx context.Context, pid int) error {
	// The options bubblewrap mounts /dev/pts with (a remount resets
	// whatever it does not name), plus the cap.
	opts := "remount,newinstance,ptmxmode=0666,mode=620,max=" + strconv.Itoa(maxPtys)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--mount=/proc/"+strconv.Itoa(pid)+"/ns/mnt", "--",
		"mount", "-n", "-t", "devpts", "-o", opts, "devpts", "/dev/pts")
	cmd.Env = []string{"PATH=/usr/sbin:/sbin:/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cap the sandbox's pseudo-terminals at %d (nsenter, mount -o %s /dev/pts): %w: %s",
			maxPtys, opts, err, strings.TrimSpace(string(out)))
	}
	return nil
}
