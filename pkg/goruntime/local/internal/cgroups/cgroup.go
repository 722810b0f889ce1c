// Package cgroups makes, limits, watches and removes the local backend's
// per-sandbox cgroups (v1 hierarchies or the v2 tree): one cgroup per
// sandbox, named by its ID, in a group directory below the caller's own
// cgroup (layout.go). A cgroup caps the sandbox's memory (socket buffers
// included), tasks and CPU time, weighs its CPU share (weight.go) and
// counts the limits it ran into; prune.go removes what dead sandboxes
// left. Nothing here is global: every call finds its own layout.
package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// groupName is the name of the directory under the caller's own cgroup
// that holds one cgroup per sandbox. Nesting under our own cgroup keeps
// whatever limits the caller already runs under.
const groupName = "go-runtime-sandbox"

// Cgroup is one sandbox's cgroup: a directory per v1 hierarchy (memory,
// pids, cpu) or a single v2 directory.
type Cgroup struct {
	V2     bool   `json:"v2"`
	Memory string `json:"memory"` // v1 memory dir, or the v2 dir
	Pids   string `json:"pids"`   // v1 pids dir, or the v2 dir
	CPU    string `json:"cpu"`    // v1 cpu dir, or the v2 dir; may be empty
}

// Limits are what a sandbox's cgroup enforces.
type Limits struct {
	// MemoryBytes is what the sandbox's processes may take.
	MemoryBytes int64
	// FilesBytes is memory its in-memory files (a memory disk) may take on
	// top of MemoryBytes: the memory limit is the sum of the two, while
	// the socket buffer limit (socketBytes) follows MemoryBytes alone.
	FilesBytes int64
	Processes  int // pids.max: tasks (processes and threads) at once
	CPUs       int
	// Background starts the sandbox at a low CPU weight instead of its
	// CPUs' worth (see cpuWeightBackgroundV1); Cgroup.Foreground gives it
	// the full weight.
	Background bool
	// GroupWeight is the CPU weight of all sandboxes together (their
	// group) against the caller's other processes, in NiceWeight's units
	// (1024: a process at nice 0), written when the sandbox's cgroup is
	// made (weight.go); 0 leaves the group's weight as it is.
	GroupWeight int
}

// socketBytes is how much socket buffer memory (TCP and UDP, in all
// its sockets) a sandbox of memoryBytes may hold: an eighth of its memory
// limit, 128 MiB for the default 1 GiB, so one sandbox takes at most a
// small share of the host's tcp_mem and udp_mem (2.2 GiB each on these
// machines). Past it, sends block and receive queues drop, in that
// sandbox alone.
func socketBytes(memoryBytes int64) int64 { return memoryBytes / 8 }

// memoryLimit is the cgroup's memory limit: the processes' memory and
// their in-memory files'.
func (l Limits) memoryLimit() int64 { return l.MemoryBytes + l.FilesBytes }

// Counters are the cgroup's limit-hit counters at one moment.
type Counters struct {
	OOMKills int64 // processes the OOM killer killed
	PidsMax  int64 // forks refused at pids.max
}

// New creates the cgroup for sandbox id with lim applied. Errors
// name the fix; callers wrap them with ErrUnavailable.
func New(id string, lim Limits) (*Cgroup, error) {
	l, err := findLayout()
	if err != nil {
		return nil, err
	}
	return l.create(id, lim)
}

// create makes the cgroup for sandbox id in l with lim applied.
func (l layout) create(id string, lim Limits) (*Cgroup, error) {
	if l.v1 != nil {
		return newV1(id, lim, l.v1)
	}
	return newV2(id, lim, l.v2Own, l.v2)
}

// newV1 creates sandbox id's cgroups in groups (controller -> group
// directory, see layout).
func newV1(id string, lim Limits, groups map[string]string) (*Cgroup, error) {
	cg := &Cgroup{}
	mk := func(ctrl string) (string, error) {
		dir := filepath.Join(groups[ctrl], id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("create cgroup v1 %s group %s: %w (the local backend needs write access to the cgroup hierarchy)", ctrl, dir, err)
		}
		return dir, nil
	}
	var err error
	if cg.Memory, err = mk("memory"); err != nil {
		return nil, err
	}
	if cg.Pids, err = mk("pids"); err != nil {
		cg.Remove()
		return nil, err
	}
	if groups["cpu"] != "" {
		if cg.CPU, err = mk("cpu"); err != nil {
			cg.Remove()
			return nil, err
		}
	}
	mem := strconv.FormatInt(lim.memoryLimit(), 10)
	writes := [][2]string{
		{filepath.Join(cg.Memory, "memory.limit_in_bytes"), mem},
		{filepath.Join(cg.Pids, "pids.max"), strconv.Itoa(lim.Processes)},
	}
	// memsw (RAM+swap) exists only with swap accounting; set it when present
	// so swapping does not stretch the limit.
	if _, err := os.Stat(filepath.Join(cg.Memory, "memory.memsw.limit_in_bytes")); err == nil {
		writes = append(writes, [2]string{filepath.Join(cg.Memory, "memory.memsw.limit_in_bytes"), mem})
	}
	// Socket buffers (TCP and UDP) are host-wide memory (net.ipv4.tcp_mem,
	// udp_mem) that a v1 memory limit does not cover: without a limit of
	// their own one sandbox filled the host's whole tcp_mem (2.2 GiB) in
	// 17 s and stalled every TCP connection on the host and in other
	// sandboxes. v2's memory.max covers them.
	if _, err := os.Stat(filepath.Join(cg.Memory, "memory.kmem.tcp.limit_in_bytes")); err == nil {
		writes = append(writes, [2]string{filepath.Join(cg.Memory, "memory.kmem.tcp.limit_in_bytes"), strconv.FormatInt(socketBytes(lim.MemoryBytes), 10)})
	}
	if cg.CPU != "" && lim.CPUs > 0 {
		writes = append(writes,
			[2]string{filepath.Join(cg.CPU, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)},
			[2]string{filepath.Join(cg.CPU, "cpu.cfs_quota_us"), strconv.Itoa(lim.CPUs * cpuPeriod)},
			[2]string{filepath.Join(cg.CPU, "cpu.shares"), cpuWeight(false, lim.CPUs, lim.Background)})
	}
	if cg.CPU != "" && lim.GroupWeight > 0 {
		// The group of all sandboxes weighs as one of the caller's
		// processes (weight.go). Not an error when it cannot be set: a
		// user's group on v1 is root's to weigh (Delegate).
		_ = os.WriteFile(filepath.Join(filepath.Dir(cg.CPU), "cpu.shares"), []byte(groupWeight(false, lim.GroupWeight)), 0o644)
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0o644); err != nil {
			cg.Remove()
			return nil, fmt.Errorf("set cgroup limit %s=%s: %w", w[0], w[1], err)
		}
	}
	return cg, nil
}

// newV2 creates sandbox id's cgroup in parent, the group directory
// below own (see layout).
func newV2(id string, lim Limits, own, parent string) (*Cgroup, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup v2 group %s: %w (run as root, or in a delegated cgroup: systemd-run --user --scope -p Delegate=yes ...)", parent, err)
	}
	// Controllers must be enabled in every ancestor's subtree_control; ours
	// is the last step, the rest is the delegation's job. The caller's own
	// cgroup holds processes (v2leaf.go).
	cpu := true // the cpu controller is optional, as on v1
	for _, dir := range []string{own, parent} {
		enabled, err := enableControllers(dir, []string{"memory", "pids"}, []string{"cpu"})
		if err != nil {
			return nil, fmt.Errorf("enable cgroup v2 memory and pids controllers below %s: %w (the caller's cgroup must be delegated to it: run it under systemd-run --user --scope -p Delegate=yes)", dir, err)
		}
		cpu = cpu && len(enabled) == 1
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup v2 %s: %w", dir, err)
	}
	cg := &Cgroup{V2: true, Memory: dir, Pids: dir}
	if cpu {
		cg.CPU = dir
	}
	writes := [][2]string{
		{"memory.max", strconv.FormatInt(lim.memoryLimit(), 10)},
		{"memory.swap.max", "0"},
		{"pids.max", strconv.Itoa(lim.Processes)},
	}
	if cg.CPU != "" && lim.CPUs > 0 {
		writes = append(writes,
			[2]string{"cpu.max", fmt.Sprintf("%d %d", lim.CPUs*cpuPeriod, cpuPeriod)},
			[2]string{"cpu.weight", cpuWeight(true, lim.CPUs, lim.Background)})
	}
	if cg.CPU != "" && lim.GroupWeight > 0 {
		_ = os.WriteFile(filepath.Join(parent, "cpu.weight"), []byte(groupWeight(true, lim.GroupWeight)), 0o644)
	}
	for _, w := range writes {
		p := filepath.Join(dir, w[0])
		if err := os.WriteFile(p, []byte(w[1]), 0o644); err != nil && !(w[0] == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			cg.Remove()
			return nil, fmt.Errorf("set cgroup limit %s=%s: %w", p, w[1], err)
		}
	}
	return cg, nil
}

func (cg *Cgroup) dirs() []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range []string{cg.Memory, cg.Pids, cg.CPU} {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// Add moves process pid into the sandbox's cgroup(s).
func (cg *Cgroup) Add(pid int) error {
	for _, d := range cg.dirs() {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move process %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// ThreadFiles are the files a process writes "0" to, each moving the
// thread that writes into one of the sandbox's cgroups: the v1
// hierarchies' tasks files. A thread that moves itself skips the
// kernel's lock on every thread group (cgroup_threadgroup_rwsem) that
// writing another process's pid to cgroup.procs takes, whose write side
// waits a grace period: microseconds against milliseconds a start. The
// thread must then be the only one left, as after it execs. nil on v2,
// where writing "0" moves the whole process and takes that lock
// anyway: there Add is the way.
func (cg *Cgroup) ThreadFiles() []string {
	if cg.V2 {
		return nil
	}
	var out []string
	for _, d := range cg.dirs() {
		out = append(out, filepath.Join(d, "tasks"))
	}
	return out
}

// Holds reports, with an error naming the first that does not, whether
// every one of the sandbox's cgroups holds process pid: the check on a
// move the process made itself (ThreadFiles).
func (cg *Cgroup) Holds(pid int) error {
	for _, d := range cg.dirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("list the processes of cgroup %s: %w", d, err)
		}
		if !slices.Contains(strings.Fields(string(data)), strconv.Itoa(pid)) {
			return fmt.Errorf("process %d is not in cgroup %s", pid, d)
		}
	}
	return nil
}

// Procs lists the processes in the sandbox's cgroup.
func (cg *Cgroup) Procs() ([]int, error) {
	data, err := os.ReadFile(filepath.Join(cg.Pids, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("list the processes of cgroup %s: %w", cg.Pids, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Counters reads the limit-hit counters.
func (cg *Cgroup) Counters() Counters {
	var c Counters
	if cg.V2 {
		c.OOMKills = readKey(filepath.Join(cg.Memory, "memory.events"), "oom_kill")
	} else {
		c.OOMKills = readKey(filepath.Join(cg.Memory, "memory.oom_control"), "oom_kill")
	}
	c.PidsMax = readKey(filepath.Join(cg.Pids, "pids.events"), "max")
	return c
}

// readKey returns the number after key in a "key value" per line file, or 0.
func readKey(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// cpuPeriod is the period of a sandbox's CPU limit, in microseconds (the
// kernel's default): its quota is CPUs periods per period.
const cpuPeriod = 100000

// killGrace is how long Kill goes on killing before it gives up: processes
// SIGKILLed leave the group once the kernel has torn them down.
const killGrace = 5 * time.Second

// Kill SIGKILLs every process in the cgroup except those in keep, until
// none is left (or only keep) and none is still counted (uncounted), or
// killGrace passes.
func (cg *Cgroup) Kill(keep map[int]bool) error {
	deadline := time.Now().Add(killGrace)
	for {
		pids, err := cg.Procs()
		if err != nil {
			// ENODEV: the group was removed while we read it (a concurrent
			// prune of the same dead sandbox); either way it is empty.
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
				return nil
			}
			return err
		}
		left := 0
		for _, p := range pids {
			if !keep[p] {
				left++
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		counted := 0
		if left == 0 {
			if counted = cg.uncounted(pids); counted == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if left == 0 {
				return fmt.Errorf("%d tasks of killed processes are still counted in cgroup %s (not reaped yet)", counted, cg.Pids)
			}
			return fmt.Errorf("%d processes still in cgroup %s", left, cg.Pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// uncounted is how many tasks pids.current counts beyond the threads of
// pids, the processes left in the cgroup: killed processes not reaped
// yet. A process that has exited leaves cgroup.procs at once (in v1)
// but stays in pids.current until its parent (in a sandbox, its PID 1)
// reaps it, so a command started right after a kill could otherwise find
// the group still full: the zombies of a fork bomb stand in for its
// processes. 0 when pids.current cannot be read.
func (cg *Cgroup) uncounted(pids []int) int {
	// The threads first: one started between the two reads makes this
	// wait a round longer rather than miss a zombie.
	threads := 0
	for _, p := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		if err != nil {
			// Gone since the list was read, or not ours to see: do not
			// wait for what cannot be told apart.
			return 0
		}
		threads += len(tasks)
	}
	data, err := os.ReadFile(filepath.Join(cg.Pids, "pids.current"))
	if err != nil {
		return 0
	}
	current, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0
	}
	return max(current-threads, 0)
}

// Remove kills what is left in the cgroup and deletes its directories.
func (cg *Cgroup) Remove() error {
	err := cg.Kill(nil)
	for _, d := range cg.dirs() {
		var rerr error
		for i := 0; i < 100; i++ {
			rerr = os.Remove(d)
			if rerr == nil || errors.Is(rerr, os.ErrNotExist) {
				rerr = nil
				break
			}
			time.Sleep(10 * time.Millisecond) // the kernel frees the group after its last task exits
		}
		if rerr != nil && err == nil {
			err = fmt.Errorf("remove cgroup %s: %w", d, rerr)
		}
	}
	return err
}
