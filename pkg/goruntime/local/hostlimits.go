package local

// Host limits that many live sandboxes run into before any one sandbox's
// own limit: the first to run out on a host answers Open with
// ErrHostLimit, an error naming it and the setting to raise, before
// anything of the sandbox is made. docs/local-backend.md, "Limits at
// scale".

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
)

// ErrHostLimit is wrapped (beside goruntime.ErrUnavailable) by Open's
// error when the host has no room for one more sandbox of a kind it
// counts: the host's task table (kernel.pid_max, kernel.threads-max),
// the host uid range (Options.HostUIDCount), loop devices for sandbox
// disks, or the memory budget of a user's sandboxes
// (Options.MemoryBudgetBytes, budget.go). The message names the limit
// and the setting to raise; closing sandboxes makes room.
var ErrHostLimit = errors.New("host limit reached")

// hostLimit wraps ErrHostLimit around err when err is one of the host
// limits.
func hostLimit(err error) error {
	if errors.Is(err, hostuid.ErrRangeFull) || errors.Is(err, disk.ErrNoLoopDevice) {
		return fmt.Errorf("%w: %w", ErrHostLimit, err)
	}
	return err
}

// checkTasks refuses a new sandbox when the host's tasks (processes and
// threads, each a pid) and one more sandbox's own (OwnTasks) would leave
// less than a sixteenth of the kernel's task limit (at least 1,024) for
// the rest of the host: past kernel.pid_max every fork on the host
// fails, the host's own services' too. An idle sandbox holds ~22 tasks,
// so the default pid_max of 32,768 holds about 1,300. limit, when
// positive, stands for the kernel's (tests).
func checkTasks(limit int) error {
	tasks, err := hostTasks()
	if err != nil {
		return nil // cannot tell: the kernel's own limit still holds
	}
	pidMax, threadsMax := readSysctl("/proc/sys/kernel/pid_max"), readSysctl("/proc/sys/kernel/threads-max")
	if limit <= 0 {
		limit = pidMax
		if threadsMax > 0 && (limit <= 0 || threadsMax < limit) {
			limit = threadsMax
		}
	}
	if limit <= 0 {
		return nil
	}
	reserve := max(1024, limit/16)
	if tasks+OwnTasks+reserve <= limit {
		return nil
	}
	return fmt.Errorf("%w: the host runs %d tasks (processes and threads) of its limit of %d (kernel.pid_max %d, kernel.threads-max %d), "+
		"and keeps %d free for itself; a sandbox needs up to %d at rest: close sandboxes, or raise the limit (sysctl -w kernel.pid_max=4194304)",
		ErrHostLimit, tasks, limit, pidMax, threadsMax, reserve, OwnTasks)
}

// hostTasks is the number of tasks on the host, from /proc/loadavg's
// fourth field (running/total).
func hostTasks() (int, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 4 {
		return 0, fmt.Errorf("/proc/loadavg: %q", data)
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0, fmt.Errorf("/proc/loadavg: %q", data)
	}
	return strconv.Atoi(total)
}

// readSysctl reads an integer sysctl file; 0 when it cannot.
func readSysctl(p string) int {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}
