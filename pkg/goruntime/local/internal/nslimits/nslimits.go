// Package nslimits sets the limits the host puts in a local sandbox's own
// namespaces (its devpts instance, its network namespace) right after it
// starts, before any command runs. The sandbox cannot change them: it has
// no capabilities, and the seccomp filter refuses mount. Each function
// takes the pid of a process inside the sandbox.
package nslimits

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

// CapPtys remounts the devpts instance of the sandbox whose process pid
// is inside it with max=maxPtys. It needs root.
//
// It runs mount(8) under nsenter(1), in the sandbox's mount namespace
// only (not its pid namespace, so no host process ever shows inside).
// Joining the namespace from this process instead would need a thread of
// its own, and Go cannot always give one back: a goroutine that ends
// locked on the main thread leaves that thread, and with it /proc/self,
// in the sandbox's mounts for the life of the process.
func CapPtys(ctx context.Context, pid int) error {
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

// listenQueue is net.core.somaxconn in a sandbox's network namespace: the
// most connections one listener holds that its program has not accepted.
// The kernel charges such a connection to no cgroup until it is accepted
// (~2.8 KB of kernel memory each, and a page of the host's tcp_mem once
// its client has sent a FIN), so the queue's length multiplies what one
// listening socket costs the host without counting against the sandbox;
// the kernel's default is 4096. 128 (the default before Linux 5.4) is
// still more than a test's server needs between two accepts. This
// lowers that cost 32 times; it does not bound it (docs/local-backend.md,
// the inventory: still open).
const listenQueue = 128

// CapListenQueue sets net.core.somaxconn to listenQueue in the network
// namespace of the sandbox whose process pid is inside it (from the host's
// /proc, which shows the sysctls of the namespace it is read from). It
// needs root.
func CapListenQueue(ctx context.Context, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/proc/"+strconv.Itoa(pid)+"/ns/net", "--",
		"sh", "-c", "echo "+strconv.Itoa(listenQueue)+" > /proc/sys/net/core/somaxconn")
	cmd.Env = []string{"PATH=/usr/sbin:/sbin:/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("set the sandbox's listen queue (net.core.somaxconn) to %d (nsenter): %w: %s", listenQueue, err, strings.TrimSpace(string(out)))
	}
	return nil
}
