package local_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The memory budget test's user and sizes: a uid no other test uses, and
// sandboxes small enough not to stress the host. Each sandbox is promised
// budgetMemory and its budgetDisk disk in memory (160 MiB), so the budget
// holds exactly 3.
const (
	budgetUID    = 65525
	budgetMemory = 96 << 20
	budgetDisk   = 64 << 20
	budgetBytes  = 3 * (budgetMemory + budgetDisk)
	// budgetOpens is how many sandboxes the helper asks for at once,
	// half from each of its two backends: without a budget all of them
	// open, 1,920 MiB.
	budgetOpens = 12
	// budgetSlack is what MemAvailable may fall past the budget while the
	// sandboxes fill: the helper process itself, the kernel's own
	// memory for the sandboxes' processes and namespaces, and the rest of
	// this shared host moving meanwhile. With the budget the fill took
	// MemAvailable 230-475 MiB down; without, the 12 sandboxes took it
	// 1,435 MiB down (the group charged 1,677 MiB at most).
	budgetSlack = 384 << 20
	// groupSlack is what the user's group may be charged past the budget
	// outside its sandboxes' cgroups.
	groupSlack = 8 << 20
)

// TestMemoryBudgetAsUser: a user's sandboxes, whose disks are in memory,
// are admitted within Options.MemoryBudgetBytes, counted over every
// process and state directory of the user. The backend runs as uid 65525
// (budgetHelper): two backends of two state directories ask for 12
// sandboxes at once and 3 open (160 MiB each, a budget of 480); the
// rest are refused with ErrHostLimit naming the setting. Then every open
// sandbox fills its disk and runs a memory bomb at once: the user's
// cgroup group is never charged more than the budget (its high-water
// mark), MemAvailable never falls more than the budget (and a slack for
// the rest of the host) below what it was, and the bomb's note states
// the limit that applies (memory and the disk while it is empty). A
// warm pool of 2 then neither fills the budget nor locks Opens out: 3
// open, the 4th is refused, and one closed makes room for another; under
// a budget of one sandbox, the Open that claims one of a full pool of 2
// ends the other to fit.
func TestMemoryBudgetAsUser(t *testing.T) {
	u := newAsUser(t, budgetUID, "grs-budget", rootlessSubIDs+4*65536, true)
	// A second state directory of the same user, with the seed shared.
	state2 := filepath.Join(u.home, "state2")
	if err := os.Mkdir(state2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state2, budgetUID, budgetUID); err != nil {
		t.Fatal(err)
	}
	shareSeed(t, filepath.Join(state2, "seed"))
	group := memoryGroup(t, budgetUID)
	// The high-water mark of what the user's sandboxes are charged.
	if err := os.WriteFile(filepath.Join(group, "memory.max_usage_in_bytes"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := u.command("memory-budget", true, "LOCAL_TEST_STATE_DIR2="+state2)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	before := memAvailable(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// MemAvailable while the sandboxes fill (between the helper's
	// "filling" and "filled").
	var (
		mu      sync.Mutex
		lowest  = before
		filling bool
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			mu.Lock()
			if filling {
				lowest = min(lowest, memAvailable(t))
			}
			mu.Unlock()
		}
	}()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		switch line {
		case "filling", "filled":
			mu.Lock()
			filling = line == "filling"
			if !filling {
				lowest = min(lowest, memAvailable(t))
			}
			mu.Unlock()
		}
	}
	err = cmd.Wait()
	close(stop)
	<-sampled
	t.Logf("the backend as uid %d:\n%s%s", budgetUID, out.String(), stderr.String())
	if err != nil {
		t.Fatalf("budget helper: %v", err)
	}
	peak := readInt(t, filepath.Join(group, "memory.max_usage_in_bytes"))
	t.Logf("MemAvailable %d MiB before, %d MiB at its lowest while the sandboxes filled (%d MiB less); the user's group was charged %d MiB at most; budget %d MiB",
		before>>20, lowest>>20, (before-lowest)>>20, peak>>20, budgetBytes>>20)

	got := out.String()
	if n := lineField(got, "admitted"); n != 3 {
		t.Errorf("%d of %d sandboxes asked for at once opened, want 3 (a budget of %d MiB, %d MiB each)", n, budgetOpens, budgetBytes>>20, (budgetMemory+budgetDisk)>>20)
	}
	if !strings.Contains(got, "refusal host-limit unavailable") {
		t.Errorf("the sandboxes past the budget were not refused with an error wrapping ErrHostLimit and goruntime.ErrUnavailable")
	}
	for _, want := range []string{"Options.MemoryBudgetBytes", "promised 480 MiB of 480 MiB", "one more needs 160 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal does not say %q", want)
		}
	}
	// The group is also charged, outside its sandboxes' cgroups, for what
	// a sandbox's first process touches before it joins its own (seen:
	// 288 KiB past the budget of sandboxes filled to their limits).
	if peak > budgetBytes+groupSlack {
		t.Errorf("the user's sandboxes were charged %d bytes at once, past the budget of %d bytes and %d of slack for the group's own", peak, budgetBytes, groupSlack)
	}
	if floor := before - budgetBytes - budgetSlack; lowest < floor {
		t.Errorf("MemAvailable fell to %d MiB while the sandboxes filled, below the floor of %d MiB (%d before, less the budget of %d and a slack of %d)",
			lowest>>20, floor>>20, before>>20, budgetBytes>>20, budgetSlack>>20)
	}
	if c := strings.Count(got, "fill "+string(goruntime.OutcomeDiskLimit)+"\n"); c != 3 {
		t.Errorf("%d disk fills ended at the disk quota, want 3", c)
	}
	if c := strings.Count(got, "bomb "+string(goruntime.OutcomeMemoryLimit)+"\n"); c != 3 {
		t.Errorf("%d memory bombs ended at the memory limit, want 3", c)
	}
	for _, want := range []string{"96 MiB for its processes", "up to 64 MiB more while its disk is empty", "the disk is in memory (Options.DiskBytes)", "share 160 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("the memory bomb's note does not state the limit as %q", want)
		}
	}
	if !strings.Contains(got, "pool opened 3 refused host-limit unavailable\n") {
		t.Errorf("with a warm pool of 2, not 3 sandboxes opened and the 4th refused for the budget")
	}
	if !strings.Contains(got, "pool reopen ok\n") {
		t.Errorf("with a warm pool, a sandbox closed did not make room for another")
	}
	if !strings.Contains(got, "tight open ok, then host-limit unavailable\n") {
		t.Errorf("under a budget of one sandbox, with a warm pool of 2 (ready: %d), the first Open did not open or the second was not refused", lineField(got, "tight pool ready"))
	}
}

// budgetHelper is the body of TestMemoryBudgetAsUser's process of uid
// 65525. It prints, one a line:
//
//	admitted N                how many of budgetOpens sandboxes asked for at once opened
//	refusal [host-limit] [unavailable] MESSAGE   the first refusal, with the sentinels it wraps
//	filling, filled           around the fill of every open sandbox at once
//	fill OUTCOME              a disk fill's outcome
//	bomb OUTCOME              a memory bomb's, then its note
//	pool opened N refused [host-limit]   sandboxes opened one by one with a warm pool of 2
//	pool reopen ok            an open after one of them closed
//	tight pool ready N        a pool of 2 under a budget of one sandbox
//	tight open ok, then [host-limit] [unavailable]   its first Open, then its second's refusal
func budgetHelper(ctx context.Context, opts local.Options) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "budget helper: %s: %v\n", what, err)
		return 1
	}
	opts.MemoryBytes, opts.DiskBytes, opts.DiskInodes = budgetMemory, budgetDisk, 8192
	opts.MemoryBudgetBytes = budgetBytes
	opts.WarmPool = -1
	opts2 := opts
	opts2.StateDir = os.Getenv("LOCAL_TEST_STATE_DIR2")
	var backends []*local.Backend
	for _, o := range []local.Options{opts, opts2} {
		b, err := local.New(o)
		if err != nil {
			return fail("new", err)
		}
		defer b.Close(context.Background())
		backends = append(backends, b)
	}

	var (
		mu       sync.Mutex
		open     []*goruntime.Session
		refusals []error
		wg       sync.WaitGroup
	)
	for i := range budgetOpens {
		wg.Go(func() {
			s, err := goruntime.Open(ctx, backends[i%2], goruntime.Options{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusals = append(refusals, err)
				return
			}
			open = append(open, s)
		})
	}
	wg.Wait()
	fmt.Printf("admitted %d\n", len(open))
	if len(refusals) > 0 {
		fmt.Printf("refusal %s%s\n", sentinels(refusals[0]), refusals[0])
	}

	fmt.Println("filling")
	results := make([][2]*goruntime.Result, len(open))
	for i, s := range open {
		wg.Go(func() {
			fill, err := s.Execute(ctx, goruntime.Request{Command: diskFill})
			if err != nil {
				fill = &goruntime.Result{Stderr: err.Error()}
			}
			bomb, err := s.Execute(ctx, goruntime.Request{Command: memoryBomb, Timeout: time.Minute})
			if err != nil {
				bomb = &goruntime.Result{Stderr: err.Error()}
			}
			results[i] = [2]*goruntime.Result{fill, bomb}
		})
	}
	wg.Wait()
	fmt.Println("filled")
	noted := false
	for _, r := range results {
		fmt.Printf("fill %s\nbomb %s\n", r[0].Outcome, r[1].Outcome)
		if i := strings.LastIndex(r[1].Stderr, "[go-runtime-sandbox"); i >= 0 && !noted {
			fmt.Printf("note %s\n", strings.TrimSpace(r[1].Stderr[i:]))
			noted = true
		}
	}
	for _, s := range open {
		s.Close(context.Background())
	}

	// A warm pool under the budget.
	opts.WarmPool = 2
	b, err := local.New(opts)
	if err != nil {
		return fail("new with a warm pool", err)
	}
	defer b.Close(context.Background())
	for deadline := time.Now().Add(time.Minute); b.WarmPoolReady() < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	var pooled []*goruntime.Session
	defer func() {
		for _, s := range pooled {
			s.Close(context.Background())
		}
	}()
	for range 4 {
		s, err := goruntime.Open(ctx, b, goruntime.Options{})
		if err != nil {
			fmt.Printf("pool opened %d refused %s\n", len(pooled), strings.TrimSpace(sentinels(err)))
			fmt.Printf("pool refusal %v\n", err)
			break
		}
		pooled = append(pooled, s)
	}
	if len(pooled) == 0 {
		return fail("open with a warm pool", errors.New("none opened"))
	}
	pooled[0].Close(context.Background())
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Printf("pool reopen: %v\n", err)
		return 0
	}
	pooled[0] = s
	fmt.Println("pool reopen ok")
	for _, s := range pooled {
		s.Close(context.Background())
	}
	pooled = nil
	// The budget is the user's, over every backend: b's pool, refilled
	// after those closes, would hold the room the next backend's pool
	// needs (seen on a busy machine: its pool never started).
	if err := b.Close(context.Background()); err != nil {
		return fail("close the backend with a warm pool", err)
	}

	// A budget of one sandbox and a full pool of 2 (64 MiB each): the
	// Open that claims one must end the other to fit.
	opts.MemoryBudgetBytes = budgetMemory + budgetDisk
	one, err := local.New(opts)
	if err != nil {
		return fail("new with a budget of one sandbox", err)
	}
	defer one.Close(context.Background())
	for deadline := time.Now().Add(time.Minute); one.WarmPoolReady() < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("tight pool ready %d\n", one.WarmPoolReady())
	s, err = goruntime.Open(ctx, one, goruntime.Options{})
	if err != nil {
		fmt.Printf("tight open: %v\n", err)
		return 0
	}
	pooled = append(pooled, s)
	_, err = goruntime.Open(ctx, one, goruntime.Options{})
	fmt.Printf("tight open ok, then %s\n", strings.TrimSpace(sentinels(err)))
	return 0
}

// sentinels names the sentinel errors err wraps that a budget's refusal
// must: "host-limit unavailable ".
func sentinels(err error) string {
	var s string
	if errors.Is(err, local.ErrHostLimit) {
		s += "host-limit "
	}
	if errors.Is(err, goruntime.ErrUnavailable) {
		s += "unavailable "
	}
	return s
}

// memoryGroup is the cgroup v1 memory group root delegates to uid.
func memoryGroup(t *testing.T, uid int) string {
	t.Helper()
	groups, err := local.DelegateCgroups(uid, uid) // made already: this only finds them
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if _, err := os.Stat(filepath.Join(g, "memory.max_usage_in_bytes")); err == nil {
			return g
		}
	}
	t.Fatalf("no memory group among %q", groups)
	return ""
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Error(err)
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Error(err)
			}
			return kb << 10
		}
	}
	t.Error("no MemAvailable in /proc/meminfo")
	return 0
}

// readInt reads a file holding one integer.
func readInt(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
