package server

import (
	"runtime"
	"sync"
)

// fileCalls is Config.FileCalls for a server that reserved osThreads:
// half of them, so file calls blocked in system calls at once leave the
// other half to the runtime's own threads and to commands being started
// and waited for. 0 (no reserve): no bound.
func fileCalls(osThreads int64) int { return int(osThreads / 2) }

// maxOSThreads bounds --os-threads.
const maxOSThreads = 1024

// reserveOSThreads makes the Go runtime start n OS threads now, while the
// sandbox has room for them, and keep them for later.
//
// Commands share the sandbox's task limit (a pids cgroup counts threads)
// with this process. When a command has taken every task, the Go runtime
// cannot start a thread it needs (clone fails with EAGAIN for longer than
// its ~200 ms of retries) and aborts with "failed to create new OS
// thread", so a fork bomb would kill the server instead of costing only
// the command. The runtime never ends an idle thread, so threads started
// here serve every later blocking system call: the server would run out
// only when more than about n calls blocked at once while the table is
// full, which is why file calls take turns (fileCalls).
//
// Each goroutine locks itself to a thread and blocks there, which makes
// the scheduler start another thread for the next; once all n hold one,
// they unlock and exit, leaving their threads idle. n <= 0 does nothing.
func reserveOSThreads(n int64) {
	if n <= 0 {
		return
	}
	var locked sync.WaitGroup
	release := make(chan struct{})
	for range n {
		locked.Add(1)
		go func() {
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
}
