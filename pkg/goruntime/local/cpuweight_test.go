package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// cpuWeightOf reads the CPU weight of sandbox id's cgroup (cgroup v1
// cpu.shares or v2 cpu.weight), its group's, and the weight of one task
// in that unit. It skips the test when the host has no cpu controller.
func cpuWeightOf(t *testing.T, b *local.Backend, id string) (sandbox, group, one int) {
	t.Helper()
	return cpuWeightIn(t, b.StateDir(), id)
}

// cpuWeightIn is cpuWeightOf for a sandbox of the state directory
// stateDir.
func cpuWeightIn(t *testing.T, stateDir, id string) (sandbox, group, one int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cgroup struct {
			V2  bool   `json:"v2"`
			CPU string `json:"cpu"`
		} `json:"cgroup"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Cgroup.CPU == "" {
		t.Skip("no cpu controller: the backend sets no CPU limits here")
	}
	file, one := "cpu.shares", 1024
	if m.Cgroup.V2 {
		file, one = "cpu.weight", 100
	}
	read := func(dir string) int {
		t.Helper()
		v, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(v)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return read(m.Cgroup.CPU), read(filepath.Dir(m.Cgroup.CPU)), one
}

// TestCPUWeight: a sandbox allowed CPUs cores competes for CPU with the
// other sandboxes as that many tasks (cgroup v1 cpu.shares 1024 each, v2
// cpu.weight 100 each). (What the group of all sandboxes weighs against
// the caller: TestCPUWeightFollowsCaller.)
func TestCPUWeight(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a sandbox's weight from one task's")
	}
	opts := testOptions()
	opts.CPUs = 2
	b := newBackend(t, opts)
	s := openSession(t, b)
	sandbox, _, one := cpuWeightOf(t, b, s.ID())
	if sandbox != 2*one {
		t.Errorf("sandbox weight = %d, want %d (2 CPUs)", sandbox, 2*one)
	}
}

// TestCPUWeightWarmPool: a sandbox waiting in the warm pool weighs a
// sixteenth of one task, so starting it takes little CPU time from the
// session that just claimed another; claimed, it has its full weight.
func TestCPUWeightWarmPool(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a sandbox's weight from one task's")
	}
	opts := poolOptions(1)
	opts.CPUs = 2
	b := newBackend(t, opts)
	waitPool(t, b, 1)
	pooled, _ := b.List()
	waiting := map[string]int{}
	for _, id := range pooled {
		// Other processes' sandboxes share the state directory: skip
		// those still starting (no state file yet) or gone.
		if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json")); err != nil {
			continue
		}
		if w, _, one := cpuWeightOf(t, b, id); w == one/16 {
			waiting[id] = w
		}
	}
	if len(waiting) == 0 {
		t.Fatalf("no sandbox of %v weighs a sixteenth of one task while in the warm pool", pooled)
	}
	s := openSession(t, b)
	if _, ok := waiting[s.ID()]; !ok {
		t.Fatalf("Open returned %s, not the sandbox waiting in the pool (%v)", s.ID(), waiting)
	}
	if w, _, one := cpuWeightOf(t, b, s.ID()); w != 2*one {
		t.Errorf("claimed sandbox weight = %d, want %d (2 CPUs)", w, 2*one)
	}
	mustOK(t, s, goruntime.Request{Files: helloFiles, Command: "go run main.go"})
}

// cpuWeightHelper is a process that opens a sandbox from a cpu cgroup
// of its own (LOCAL_TEST_CPU_CGROUP), at the nice value LOCAL_TEST_NICE
// (and its autogroup at LOCAL_TEST_AUTOGROUP_NICE, when set: the test
// starts it in a session of its own), with Options.CPUWeight
// LOCAL_TEST_CPU_WEIGHT; it prints the sandbox's ID and its state
// directory, and closes it when its stdin ends (TestCPUWeightFollowsCaller).
func cpuWeightHelper(ctx context.Context, opts local.Options) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	pid := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(filepath.Join(os.Getenv("LOCAL_TEST_CPU_CGROUP"), "cgroup.procs"), []byte(pid), 0o644); err != nil {
		return fail(err)
	}
	if g := os.Getenv("LOCAL_TEST_AUTOGROUP_NICE"); g != "" {
		if err := os.WriteFile("/proc/self/autogroup", []byte(g), 0o644); err != nil {
			return fail(err)
		}
	}
	nice, _ := strconv.Atoi(os.Getenv("LOCAL_TEST_NICE"))
	if err := unix.Setpriority(unix.PRIO_PROCESS, os.Getpid(), nice); err != nil {
		return fail(err)
	}
	opts.WarmPool = -1
	opts.CPUWeight, _ = strconv.Atoi(os.Getenv("LOCAL_TEST_CPU_WEIGHT"))
	b, err := local.New(opts)
	if err != nil {
		return fail(err)
	}
	defer b.Close(ctx)
	sb, err := b.Open(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Println(sb.ID())
	fmt.Println(b.StateDir())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := sb.Close(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// ownCPUCgroupV1 returns where this process's cgroup v1 cpu group is
// (the hierarchy's mount point joined with its path), or "" when the
// host has no v1 cpu hierarchy.
func ownCPUCgroupV1(t *testing.T) string {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mnt := ""
	for _, line := range strings.Split(string(mounts), "\n") {
		// ... mountpoint ... - cgroup cgroup rw,cpu
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 3 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "cpu") {
			mnt = f[4]
			break
		}
	}
	if mnt == "" {
		return ""
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return filepath.Join(mnt, parts[2])
		}
	}
	return ""
}

// TestCPUWeightFollowsCaller: the group of all sandboxes weighs against
// the caller's processes as the caller itself does: the kernel's weight
// of its nice value (nice 10: 110, where a process at nice 0 weighs
// 1024), or of its session's autogroup where that gives less, or what
// Options.CPUWeight says. Before, the group weighed 1024 per CPU of the
// machine, whatever the caller's nice: twice a process at nice 0 here.
// Each case is a helper process in a cgroup v1 cpu group of its own, so
// that no other backend on this machine writes the group's weight
// meanwhile. Only the weights are checked; what they give in CPU time is
// measured by cmd/bench's cpu-share section.
func TestCPUWeightFollowsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("moves its helpers into cpu cgroups of their own: needs root")
	}
	own := ownCPUCgroupV1(t)
	if own == "" {
		t.Skip("no cgroup v1 cpu hierarchy here")
	}
	autogroups, _ := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	cases := []struct {
		name                string
		nice, weight        int
		autogroupNice       string
		want                int
		needsAutogroupsOnly bool
	}{
		{name: "nice 10", nice: 10, want: 110},
		{name: "nice 10, Options.CPUWeight 300", nice: 10, weight: 300, want: 300},
		{name: "nice 0, autogroup nice 5", autogroupNice: "5", want: 335, needsAutogroupsOnly: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needsAutogroupsOnly && strings.TrimSpace(string(autogroups)) != "1" {
				t.Skip("the kernel groups no sessions here (kernel.sched_autogroup_enabled)")
			}
			dir := filepath.Join(own, "cpuweight-test-"+randomID(t))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Empty once the sandbox's last process is reaped, which a
				// slow init may take seconds to do.
				var err error
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					_ = os.Remove(filepath.Join(dir, "go-runtime-sandbox"))
					if err = os.Remove(dir); err == nil || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Errorf("remove the test's cpu cgroup: %v", err)
				}
			})
			cmd := helperCmd("cpu-weight", "LOCAL_TEST_CPU_CGROUP="+dir, "LOCAL_TEST_NICE="+strconv.Itoa(c.nice),
				"LOCAL_TEST_AUTOGROUP_NICE="+c.autogroupNice, "LOCAL_TEST_CPU_WEIGHT="+strconv.Itoa(c.weight))
			// A session of its own: its own autogroup, whose nice it sets.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var printed []string
			for len(printed) < 2 && sc.Scan() {
				printed = append(printed, sc.Text())
			}
			if len(printed) < 2 {
				stdin.Close()
				_ = cmd.Wait()
				t.Fatalf("helper printed no sandbox ID and state directory: %s", stderr.String())
			}
			sandbox, group, one := cpuWeightIn(t, printed[1], printed[0])
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("helper: %v: %s", err, stderr.String())
			}
			if group != c.want {
				t.Errorf("the sandboxes' group weighs %d; want %d", group, c.want)
			}
			if sandbox != runtime.NumCPU()*one {
				t.Errorf("the sandbox weighs %d among its siblings; want %d (its CPUs)", sandbox, runtime.NumCPU()*one)
			}
		})
	}
}

// TestCPUWeightWarmPoolWaited: a warm-pool start that an Open waits for
// (a fresh process's first Open, while its pool fills) has the full CPU
// weight while the Open waits, and the low weight again once it no
// longer does; a start that no Open waits for keeps the low weight, and
// the sandbox the Open then claims has the full weight. Each pool start
// is held, once its cgroup is made, until the test has read it.
func TestCPUWeightWarmPoolWaited(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a sandbox's weight from one task's")
	}
	opts := poolOptions(1)
	opts.CPUs = 2
	b := newBackend(t, opts)
	waitPool(t, b, 1)
	made, release := local.HoldPoolStarts(b)
	t.Cleanup(release) // before the backend's close, which waits for the start
	openSession(t, b)  // claims the pool's sandbox: the pool refills with a held start
	var dir string
	select {
	case dir = <-made:
	case <-time.After(3 * time.Minute):
		t.Fatal("no warm pool start made its cgroup within 3 minutes of a claim")
	}
	if dir == "" {
		t.Skip("no cpu controller: the backend sets no CPU limits here")
	}
	// weighs waits until the start's cgroup weighs want(one task's
	// weight) (an Open counts as waiting just before it weighs the start),
	// for a minute at most.
	weighs := func(want func(one int) int, what string) {
		t.Helper()
		file, one := "cpu.shares", 1024
		if _, err := os.Stat(filepath.Join(dir, "cpu.weight")); err == nil {
			file, one = "cpu.weight", 100
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			v, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			w, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil {
				t.Fatal(err)
			}
			if w == want(one) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s weighs %d, want %d", what, w, want(one))
				return
			}
		}
	}
	low := func(one int) int { return one / 16 }
	full := func(one int) int { return 2 * one } // 2 CPUs
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); local.WarmPoolWaiting(b) != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d Opens wait for the warm pool's start after a minute, want %d", local.WarmPoolWaiting(b), n)
			}
		}
	}
	type opened struct {
		s   *goruntime.Session
		err error
	}
	open := func(ctx context.Context) <-chan opened {
		ch := make(chan opened, 1)
		go func() {
			s, err := goruntime.Open(ctx, b, goruntime.Options{})
			ch <- opened{s, err}
		}()
		return ch
	}

	weighs(low, "a warm pool start no Open waits for")

	// An Open waits for the start, then gives up.
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := open(ctx)
	waiting(1)
	weighs(full, "a warm pool start an Open waits for")
	cancel()
	if r := <-gaveUp; r.err == nil {
		_ = r.s.Close(context.Background()) // it started its own before it saw ctx end
	}
	waiting(0)
	weighs(low, "a warm pool start no Open waits for any more")

	// An Open waits for the start and claims its sandbox.
	claiming := open(t.Context())
	waiting(1)
	weighs(full, "a warm pool start an Open waits for")
	release()
	r := <-claiming
	if r.err != nil {
		t.Fatalf("open: %v", r.err)
	}
	defer r.s.Close(context.Background())
	if w, _, one := cpuWeightOf(t, b, r.s.ID()); w != 2*one {
		t.Errorf("sandbox claimed from the waited-for start weighs %d, want %d (2 CPUs)", w, 2*one)
	}
	mustOK(t, r.s, goruntime.Request{Files: helloFiles, Command: "go run main.go"})
}
