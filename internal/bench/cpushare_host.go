package bench

// What the cpu-share section runs on the host: the CPU-bound program both
// sides run, the busy loops that keep the machine busy, and the cgroup v1
// cpu group of its own the section measures in.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spinSource is the CPU-bound program: one thread busy for -d (on CPU
// -cpu and at nice -nice, when given), then "<CPU time ns> <wall time
// ns>" of the whole process.
const spinSource = `package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	d := flag.Duration("d", 3*time.Second, "how long to keep busy")
	cpu := flag.Int("cpu", -1, "the CPU to keep busy (default: any)")
	nice := flag.Int("nice", 100, "the nice value to keep busy at (default: as started)")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	// The loop runs on this thread, whose CPU and nice value are set.
	runtime.LockOSThread()
	if *cpu >= 0 {
		var mask [16]uint64
		mask[*cpu/64] = 1 << (*cpu % 64)
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); e != 0 {
			fmt.Fprintln(os.Stderr, "sched_setaffinity:", e)
			os.Exit(1)
		}
	}
	if *nice != 100 {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, *nice); err != nil {
			fmt.Fprintln(os.Stderr, "setpriority:", err)
			os.Exit(1)
		}
	}
	start := time.Now()
	x := uint64(1)
	for time.Since(start) < *d {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	wall := time.Since(start)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		os.Exit(1)
	}
	fmt.Println(ru.Utime.Nano()+ru.Stime.Nano(), wall.Nanoseconds(), x&1)
}
`

// buildSpin builds spinSource, static, into dir and returns the binary's
// path; the same file runs on the host and, uploaded, in the sandbox.
func buildSpin(ctx context.Context, dir string) (string, error) {
	if err := writeModule(dir, map[string]string{"go.mod": "module spin\n\ngo 1.24\n", "main.go": spinSource}); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", "spin", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the CPU-bound program: %w: %s", err, out)
	}
	return filepath.Join(dir, "spin"), nil
}

// spinShare parses spin's output: the CPU it got, in CPUs (CPU time per
// wall-clock second).
func spinShare(out string) (float64, error) {
	f := strings.Fields(out)
	if len(f) != 3 {
		return 0, fmt.Errorf("the CPU-bound program printed %q, not its CPU and wall time", out)
	}
	cpu, err1 := strconv.ParseInt(f[0], 10, 64)
	wall, err2 := strconv.ParseInt(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil || wall <= 0 {
		return 0, fmt.Errorf("the CPU-bound program printed %q: %v", out, err)
	}
	return float64(cpu) / float64(wall), nil
}

// spinArgs are spin's arguments to keep CPU cpu busy for d.
func spinArgs(d time.Duration, cpu int) []string {
	return []string{"-d", d.String(), "-cpu", strconv.Itoa(cpu)}
}

// runSpin runs spin on the host for d on CPU cpu at nice and returns its
// share.
func runSpin(ctx context.Context, spin string, d time.Duration, cpu, nice int) (float64, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, spin, append(spinArgs(d, cpu), "-nice", strconv.Itoa(nice))...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("the CPU-bound program on the host: %w: %s", err, out.String())
	}
	return spinShare(out.String())
}

// busyLoops are CPU-bound processes keeping the machine busy, each in a
// session of its own: other work on the machine, not the caller's (where
// the kernel groups a session's processes, the caller's program would
// otherwise share its group with them).
type busyLoops []*exec.Cmd

// startBusy starts perCPU busy loops on each CPU of the machine,
// paused; stop ends them.
func startBusy(spin string, perCPU int) (busyLoops, error) {
	var b busyLoops
	for i := range perCPU * runtime.NumCPU() {
		cmd := exec.Command(spin, spinArgs(24*time.Hour, i%runtime.NumCPU())...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.stop()
			return nil, fmt.Errorf("start a busy loop: %w", err)
		}
		b = append(b, cmd)
	}
	b.pause()
	return b, nil
}

// pause stops the loops (SIGSTOP) and resume lets them go on
// (SIGCONT): they keep the machine busy while both sides measure, not
// while a sandbox starts or ends (a start under them took more than the
// backend's 15 s on a machine already at load 15).
func (b busyLoops) pause()  { b.signal(syscall.SIGSTOP) }
func (b busyLoops) resume() { b.signal(syscall.SIGCONT) }

func (b busyLoops) signal(sig syscall.Signal) {
	for _, cmd := range b {
		_ = cmd.Process.Signal(sig)
	}
}

func (b busyLoops) stop() {
	for _, cmd := range b {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// cpuGroup is the cgroup v1 cpu group of its own the section measures
// in, this process moved into it from home: inside it the sandboxes'
// group, the caller's program and the busy loops compete with each other
// only, and no other backend of this machine (they share the sandboxes'
// group of their cgroup) rewrites the group's weight meanwhile. It
// weighs cpuGroupShares against the rest of the machine, so that other
// work there sways the rounds less; what its members get of it is
// decided inside.
type cpuGroup struct{ dir, home string }

// cpuGroupShares is the cpuGroup's cpu.shares: ten processes at nice 0.
const cpuGroupShares = 10240

// isolateCPU moves this process into a new cpu group below its own, or
// says why it cannot (not root, no cgroup v1 cpu hierarchy).
func isolateCPU() (*cpuGroup, string) {
	if os.Geteuid() != 0 {
		return nil, "not root"
	}
	home := ownCPUCgroupV1()
	if home == "" {
		return nil, "no cgroup v1 cpu hierarchy"
	}
	g := &cpuGroup{dir: filepath.Join(home, fmt.Sprintf("go-runtime-sandbox-bench-%d", os.Getpid())), home: home}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, err.Error()
	}
	err := os.WriteFile(filepath.Join(g.dir, "cpu.shares"), []byte(strconv.Itoa(cpuGroupShares)), 0o644)
	if err == nil {
		err = os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if err != nil {
		_ = os.Remove(g.dir)
		return nil, err.Error()
	}
	return g, ""
}

// undo moves this process back home and removes the group, with the
// sandboxes' group in it and what a sandbox whose Close failed left
// there, once empty (waiting up to a minute for its last processes to be
// reaped).
func (g *cpuGroup) undo() error {
	if err := os.WriteFile(filepath.Join(g.home, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("move back to %s: %w", g.home, err)
	}
	sandboxes := filepath.Join(g.dir, "go-runtime-sandbox")
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		left, _ := filepath.Glob(filepath.Join(sandboxes, "*", "cgroup.procs"))
		for _, p := range left {
			_ = os.Remove(filepath.Dir(p))
		}
		_ = os.Remove(sandboxes)
		if err = os.Remove(g.dir); err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// ownCPUCgroupV1 returns this process's cgroup v1 cpu group directory
// (the hierarchy's mount point joined with its path in it), or "".
func ownCPUCgroupV1() string {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	mnt := ""
	for _, line := range strings.Split(string(mounts), "\n") {
		// id parent maj:min root mountpoint opts ... - cgroup cgroup rw,cpu
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 3 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "cpu") {
			mnt = f[4]
			break
		}
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || mnt == "" {
		return ""
	}
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return filepath.Join(mnt, parts[2])
		}
	}
	return ""
}
