package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// CPU weights, at two levels.
//
// The group of all sandboxes (groupName, below the caller's cgroup)
// competes with the caller's own processes, and weighs no more than one
// of them: Limits.GroupWeight, the caller's own weight from its nice
// value (CallerWeight) unless the caller sets one. The kernel weighs a
// group as a whole against its sibling tasks (or, in the root cgroup
// where the kernel groups sessions, against the caller's session), and
// gives a group's whole weight to its one busy thread: at the former
// fixed weight of 1024 per CPU of the machine (2048 on 2 CPUs, twice a
// process at nice 0) one CPU-bound program in a sandbox got about twice
// the CPU of the same program of the caller's, whatever the caller's
// nice (bubblewrap inherits it, but a task's nice only weighs within its
// own cgroup).
//
// Within the group, a sandbox may use CPUs cores, so it competes with the
// other sandboxes as CPUs tasks, not as one. A warm-pool sandbox starts
// in the background, right after a claim, when the session that claimed
// is about to run its first command. It starts at a sixteenth of one
// task's weight, so it takes little CPU time from running sandboxes, and
// gets its full weight when it is claimed, or while an Open waits for
// its start (a fresh process's first Open: that start is then the
// caller's own). (The backend's refill also waits for the claiming
// session's first commands: local's pool.go and poolweight.go.)
// These weights count only against sibling sandboxes, not against the
// host's other processes, so a busy host does not starve the pool more
// than it slows any sandbox.
const (
	cpuWeightV1 = 1024 // cgroup v1 cpu.shares of one task (the default)
	cpuWeightV2 = 100  // cgroup v2 cpu.weight of one task (the default)

	cpuWeightBackgroundV1 = cpuWeightV1 / 16 // cgroup v1 cpu.shares of a sandbox in the warm pool
	cpuWeightBackgroundV2 = cpuWeightV2 / 16 // cgroup v2 cpu.weight of a sandbox in the warm pool
)

// groupWeight is the cgroup v1 cpu.shares (2 to MaxWeight) or v2
// cpu.weight of the sandboxes' group for a weight in NiceWeight's units.
func groupWeight(v2 bool, w int) string {
	if v2 {
		return strconv.Itoa(v2Weight(w))
	}
	return strconv.Itoa(min(max(w, 2), MaxWeight))
}

// cpuWeight is the CPU weight of a sandbox allowed cpus CPUs, or of one
// in the background: cgroup v1 cpu.shares, or v2 cpu.weight.
func cpuWeight(v2 bool, cpus int, background bool) string {
	switch {
	case background && v2:
		return strconv.Itoa(cpuWeightBackgroundV2)
	case background:
		return strconv.Itoa(cpuWeightBackgroundV1)
	case v2:
		return strconv.Itoa(min(cpuWeightV2*cpus, 10000))
	}
	return strconv.Itoa(cpuWeightV1 * cpus)
}

// Foreground gives a sandbox started in the background (see
// Limits.Background) the full CPU weight of cpus CPUs. A cgroup
// without a CPU controller or limit is left alone.
func (cg *Cgroup) Foreground(cpus int) error { return cg.setWeight(cpus, false) }

// Background gives a sandbox allowed cpus CPUs the low CPU weight of one
// started in the background again (the warm pool's start that an Open
// waited for and no longer does). A cgroup without a CPU controller or
// limit is left alone.
func (cg *Cgroup) Background(cpus int) error { return cg.setWeight(cpus, true) }

// setWeight writes the CPU weight of a sandbox allowed cpus CPUs, in the
// background or not (cpuWeight).
func (cg *Cgroup) setWeight(cpus int, background bool) error {
	if cg.CPU == "" || cpus <= 0 {
		return nil
	}
	file := "cpu.shares"
	if cg.V2 {
		file = "cpu.weight"
	}
	p := filepath.Join(cg.CPU, file)
	if err := os.WriteFile(p, []byte(cpuWeight(cg.V2, cpus, background)), 0o644); err != nil {
		return fmt.Errorf("set CPU weight %s: %w", p, err)
	}
	return nil
}
