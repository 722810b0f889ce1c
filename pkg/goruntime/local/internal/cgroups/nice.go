package cgroups

// The CPU weight of the process that starts sandboxes: what its nice
// value (and its autogroup's) gives it against the processes it competes
// with, so that its sandboxes together can be given no more.

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxWeight is the largest CPU weight a sandboxes' group may be given:
// cgroup v1's largest cpu.shares.
const MaxWeight = 262144

// NiceWeight is the CPU weight the kernel gives a task at nice (-20..19,
// clamped): its sched_prio_to_weight table (kernel/sched/core.c), 1024 at
// nice 0, each step about 1.25 times the next (nice 10: 110, nice 19:
// 15). cgroup v1's cpu.shares counts in these units.
func NiceWeight(nice int) int {
	weights := [40]int{
		/* -20 */ 88761, 71755, 56483, 46273, 36291,
		/* -15 */ 29154, 23254, 18705, 14949, 11916,
		/* -10 */ 9548, 7620, 6100, 4904, 3906,
		/*  -5 */ 3121, 2501, 1991, 1586, 1277,
		/*   0 */ 1024, 820, 655, 526, 423,
		/*   5 */ 335, 272, 215, 172, 137,
		/*  10 */ 110, 87, 70, 56, 45,
		/*  15 */ 36, 29, 23, 18, 15,
	}
	return weights[min(max(nice, -20), 19)+20]
}

// v2Weight converts a weight in NiceWeight's units to cgroup v2's
// cpu.weight (100 for 1024, 1 to 10000), rounding as the kernel's
// cpu.weight.nice does.
func v2Weight(w int) int {
	return min(max((w*cpuWeightV2+cpuWeightV1/2)/cpuWeightV1, 1), 10000)
}

// CallerWeight is the CPU weight of this process against the processes
// it competes with for CPU: NiceWeight of its nice value (of its main
// thread, which renice changes), or, where the kernel groups a session's
// processes (sched_autogroup_enabled) and that group's nice gives less,
// NiceWeight of that. A sandboxes' group given it never outweighs the
// caller, whichever of the two it competes as.
func CallerWeight() int {
	// The raw system call returns 20 - nice.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, os.Getpid())
	nice := 0
	if err == nil {
		nice = 20 - prio
	}
	w := NiceWeight(nice)
	if g, err := autogroupNice(); err == nil {
		w = min(w, NiceWeight(g))
	}
	return w
}

// autogroupNice reads the nice value of this process's autogroup, or
// fails where the kernel has none or groups no sessions.
func autogroupNice() (int, error) {
	on, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if err != nil || strings.TrimSpace(string(on)) != "1" {
		return 0, fmt.Errorf("autogroups are off: %v", err)
	}
	data, err := os.ReadFile("/proc/self/autogroup")
	if err != nil {
		return 0, err
	}
	return parseAutogroup(string(data))
}

// parseAutogroup reads the nice value from /proc/<pid>/autogroup
// ("/autogroup-4 nice 0").
func parseAutogroup(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) != 3 || f[1] != "nice" {
		return 0, fmt.Errorf("autogroup %q: not \"/autogroup-N nice N\"", strings.TrimSpace(s))
	}
	return strconv.Atoi(f[2])
}
