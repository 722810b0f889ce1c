package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// CPU weights: a sandbox may use CPUs cores, so under contention it
// competes as CPUs runnable tasks, not as one. The kernel weighs a cgroup
// as a whole against its sibling tasks: with the default weight, all the
// threads of a sandbox's go build together got the CPU share of a single
// host process, so on a busy machine sandboxed builds ran several times
// slower than the same build on the host. The group holding every sandbox
// gets the weight of the machine's CPUs, so sandboxes together never
// outweigh a machine's worth of host tasks.
//
// A warm-pool sandbox starts in the background, right after a claim, when
// the session that claimed is about to run its first command. It starts
// at a sixteenth of one task's weight, so it takes little CPU time from
// running sandboxes, and gets its full weight when it is claimed. (The
// backend's refill also waits for the claiming session's first commands:
// local's pool.go.) It competes only with its sibling sandboxes, not with
// the host's other processes, so a busy host does not starve it.
const (
	cpuWeightV1 = 1024 // cgroup v1 cpu.shares of one task (the default)
	cpuWeightV2 = 100  // cgroup v2 cpu.weight of one task (the default)

	cpuWeightBackgroundV1 = cpuWeightV1 / 16 // cgroup v1 cpu.shares of a sandbox in the warm pool
	cpuWeightBackgroundV2 = cpuWeightV2 / 16 // cgroup v2 cpu.weight of a sandbox in the warm pool
)

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
func (cg *Cgroup) Foreground(cpus int) error {
	if cg.CPU == "" || cpus <= 0 {
		return nil
	}
	file := "cpu.shares"
	if cg.V2 {
		file = "cpu.weight"
	}
	p := filepath.Join(cg.CPU, file)
	if err := os.WriteFile(p, []byte(cpuWeight(cg.V2, cpus, false)), 0o644); err != nil {
		return fmt.Errorf("set CPU weight %s: %w", p, err)
	}
	return nil
}
