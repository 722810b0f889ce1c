package local

import (
	"os"
	"strconv"
	"strings"
)

func keepSet(pids []int) map[int]bool {
	m := make(map[int]bool, len(pids))
	for _, p := range pids {
		m[p] = true
	}
	return m
}

// protectFromOOM keeps the OOM killer off the processes that hold the
// sandbox together besides the server (bubblewrap, whose child the server
// is, PID 1 of the sandbox's pid namespace). The server is left at its value: commands inherit the lowest
// value they may go back to from it, and the server starts each command
// at 1000 (internal/server), so the OOM killer takes commands
// before it. Needs CAP_SYS_RESOURCE; without it this does nothing.
func protectFromOOM(pids []int) {
	server := serverPID(pids)
	for _, p := range pids {
		if p != server {
			_ = os.WriteFile("/proc/"+strconv.Itoa(p)+"/oom_score_adj", []byte("-1000"), 0o644)
		}
	}
}

// serverPID returns the pid of the runtime server among pids, or 0.
func serverPID(pids []int) int {
	for _, p := range pids {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 == serverBin {
			return p
		}
	}
	return 0
}
