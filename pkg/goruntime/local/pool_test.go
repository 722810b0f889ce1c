package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// poolOptions are testOptions with a warm pool of n sandboxes.
func poolOptions(n int) local.Options {
	o := testOptions()
	o.WarmPool = n
	return o
}

// waitPool waits until the backend's warm pool holds n sandboxes.
func waitPool(tb testing.TB, b *local.Backend, n int) {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for b.WarmPoolReady() != n {
		if time.Now().After(deadline) {
			tb.Fatalf("warm pool holds %d sandboxes after 3 minutes, want %d", b.WarmPoolReady(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mostReady is the most sandboxes b's warm pool held ready at once while
// it was watched: until it held want, or for 3 minutes.
func mostReady(b *local.Backend, want int) int {
	most := 0
	for deadline := time.Now().Add(3 * time.Minute); most < want && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		most = max(most, b.WarmPoolReady())
	}
	return most
}

// sandboxPID reads the host pid of bubblewrap from a sandbox's state file.
func sandboxPID(tb testing.TB, stateDir, id string) int {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "sandbox.json"))
	if err != nil {
		tb.Fatalf("sandbox %s state: %v", id, err)
	}
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.PID <= 0 {
		tb.Fatalf("sandbox %s state: pid %d, %v", id, m.PID, err)
	}
	return m.PID
}

// parentOf returns pid's parent pid, or 0 when pid is gone. Sandboxes'
// first process (bubblewrap) is a child of the process that started them,
// which tells this test's sandboxes from those of other processes sharing
// the state directory.
func parentOf(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// gone reports whether pid no longer runs (or is a zombie).
func gone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(string(data[i+1:])), "Z")
}

func waitGone(tb testing.TB, what string, pids []int) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				tb.Fatalf("%s: sandbox process %d still runs", what, pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestWarmPoolClaim: Open takes a started sandbox from the pool, which
// refills; the claimed sandbox is an ordinary one.
func TestWarmPoolClaim(t *testing.T) {
	b := newBackend(t, poolOptions(2))
	waitPool(t, b, 2)
	before, _ := b.List()
	s := openSession(t, b)
	if !slices.Contains(before, s.ID()) {
		t.Errorf("Open started sandbox %s instead of claiming one of the pool's %v", s.ID(), before)
	}
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go"})
	waitPool(t, b, 2) // refilled in the background
	s2 := openSession(t, b)
	if s2.ID() == s.ID() {
		t.Fatal("two Opens returned the same sandbox")
	}
}

// TestWarmPoolFillsSideBySide: a pool emptied at once refills with as
// many starts side by side as it lacks sandboxes, not one after another
// (a start waits more than it computes: one at a time, a pool of 2 ran
// dry at 10 opens a second once a start took over 100 ms). The test holds
// every start slot while the claims close, so no refill can finish before
// it has looked (on a busy machine the first refill could end before the
// last claim closed, and the pool then rightly started one start fewer).
func TestWarmPoolFillsSideBySide(t *testing.T) {
	const size = 3
	b := newBackend(t, poolOptions(size))
	waitPool(t, b, size)
	var claimed []*goruntime.Session
	for range size {
		claimed = append(claimed, openSession(t, b))
	}
	release := local.HoldStarts(b)
	defer release()
	for _, s := range claimed {
		// A closed claim refills the pool at once.
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// No start can end while the slots are held: the pool's starts under
	// way only grow, to size once every claim has settled.
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStarting(b) < size; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the pool of %d was emptied and its claims closed, %d pool starts are under way, want %d side by side",
				size, local.WarmPoolStarting(b), size)
		}
	}
	if n := b.WarmPoolReady(); n != 0 {
		t.Fatalf("the pool holds %d sandboxes while every start slot is held", n)
	}
	release()
	waitPool(t, b, size)
}

// TestWarmPoolOpenWaitsForPoolStart: an Open that finds the pool still
// filling (a fresh process's first Open) takes the sandbox of the pool
// start under way instead of starting its own beside it, and the pool
// starts the rest once the Open's first command has ended.
func TestWarmPoolOpenWaitsForPoolStart(t *testing.T) {
	opts := poolOptions(2)
	opts.StateDir = freshState(t) // its sandboxes/ holds only this backend's
	b := newBackend(t, opts)
	if n := b.WarmPoolReady(); n != 0 {
		t.Skipf("the pool filled before the first Open (%d ready): nothing to wait for", n)
	}
	if n := local.WarmPoolStarting(b); n != 1 {
		t.Fatalf("%d pool starts under way before the first Open, want the pool's first, 1", n)
	}
	s := openSession(t, b)
	started, err := os.ReadDir(filepath.Join(opts.StateDir, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(started) != 1 {
		t.Errorf("%d sandboxes started by the first Open of a backend with a pool of 2 (the pool's and its own?), want the pool's first, 1", len(started))
	}
	mustOK(t, s, goruntime.Request{Command: "echo ok"})
	waitPool(t, b, 2)
}

// TestWarmPoolStartsFirstAlone: a fresh pool starts one sandbox, and the
// rest of its size only once that one has waited unclaimed a while
// (poolRefillDelay, 2 s). The test times the wait from the last look that
// found no sandbox ready, a time before the first was, so a look a busy
// machine runs late can only lengthen what it measures.
func TestWarmPoolStartsFirstAlone(t *testing.T) {
	b := newBackend(t, poolOptions(2))
	if n := b.WarmPoolReady(); n != 0 {
		t.Skipf("the pool's first sandbox was ready before the test looked (%d ready)", n)
	}
	most := 0
	var notReady time.Time
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Millisecond) {
		now := time.Now()
		if b.WarmPoolReady() != 0 {
			break
		}
		notReady = now
		if now.After(deadline) {
			t.Fatal("the pool's first sandbox was not ready after 3 minutes")
		}
		most = max(most, local.WarmPoolStarting(b))
	}
	if most > 1 {
		t.Errorf("%d pool starts under way at once before the first was ready, want 1", most)
	}
	for deadline := time.Now().Add(3 * time.Minute); local.WarmPoolStarting(b) == 0 && b.WarmPoolReady() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool started no second sandbox within 3 minutes of its first being ready")
		}
	}
	if waited := time.Since(notReady); waited < 2*time.Second {
		t.Errorf("the pool started its second sandbox at most %v after its first was ready, want 2 s", waited.Round(time.Millisecond))
	}
	waitPool(t, b, 2)
}

// TestWarmPoolGrowsWithDemand: Opens that find the pool empty and no
// start of it to wait for make it keep more sandboxes ready, and once
// none has had to start its own for a while it goes back to its size,
// closing what waits past it. The grown size is kept (an hour) until the
// test has seen it, then given 1 s: a busy machine's slow refill cannot
// outlast it.
func TestWarmPoolGrowsWithDemand(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	local.SetWarmPoolShrinkAfter(b, time.Hour)
	waitPool(t, b, 1)
	var claimed []*goruntime.Session
	for range 4 {
		claimed = append(claimed, openSession(t, b))
	}
	for _, s := range claimed {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	most := mostReady(b, 2)
	if most < 2 {
		t.Fatalf("after 4 Opens at once against a pool of 1, the pool held at most %d ready: it did not grow", most)
	}
	// Back to its size once no Open found it empty for a second.
	local.SetWarmPoolShrinkAfter(b, time.Second)
	for deadline := time.Now().Add(time.Minute); b.WarmPoolReady() != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the Opens, the pool still holds %d, want its size, 1", b.WarmPoolReady())
		}
	}
}

// TestWarmPoolGrowsWhenOpensWait: an Open that finds the pool empty grows
// it even when it then takes a pool start under way rather than starting
// its own: Opens paced so that each waits for the pool's last start are
// Opens the pool is too small for (at 10 a second with 1,000 live, a pool
// that grew only on Opens starting their own kept each waiting). The
// start slots are held while the claim closes, so its refill is still
// under way when the next Open comes, however busy the machine.
func TestWarmPoolGrowsWhenOpensWait(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, poolOptions(1))
	local.SetWarmPoolShrinkAfter(b, time.Hour)
	waitPool(t, b, 1)
	release := local.HoldStarts(b)
	defer release()
	if err := openSession(t, b).Close(ctx); err != nil { // a closed claim refills at once
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStarting(b) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a minute after a claim was closed, the pool of 1 started no sandbox")
		}
	}
	// The Open finds the pool empty and its start under way, and waits
	// for it: the start gets its slot.
	opened := make(chan error, 1)
	go func() {
		s, err := b.Open(ctx)
		if err == nil {
			err = s.Close(ctx)
		}
		opened <- err
	}()
	for deadline := time.Now().Add(time.Minute); local.WarmPoolWaiting(b) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a minute after an Open found the pool empty, it waits for none of the pool's starts")
		}
	}
	release()
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	most := mostReady(b, 2)
	if most < 2 {
		t.Fatalf("an Open found the pool of 1 empty and waited for its start, and the pool then held at most %d ready: it did not grow", most)
	}
}

// TestWarmPoolBackendClose: Close of the backend ends the sandboxes
// waiting in the pool (processes and directories) and the pool does not
// refill; a sandbox already claimed keeps running and Open still works.
func TestWarmPoolBackendClose(t *testing.T) {
	ctx := context.Background()
	seeded := newBackend(t, testOptions()) // the seed build cache is ready
	before, _ := seeded.List()
	b, err := local.New(poolOptions(2))
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, b, 2)
	claimed := openSession(t, b)
	waitPool(t, b, 2)
	// The pool's sandboxes: new in the state directory since New, started
	// by this process, not the claimed one.
	ids, _ := b.List()
	var pool []string
	var pids []int
	for _, id := range ids {
		if slices.Contains(before, id) || id == claimed.ID() {
			continue
		}
		if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json")); err != nil {
			continue // not started (yet), or not this process's
		}
		if pid := sandboxPID(t, b.StateDir(), id); parentOf(pid) == os.Getpid() {
			pool = append(pool, id)
			pids = append(pids, pid)
		}
	}
	if len(pool) != 2 {
		t.Fatalf("found %d new sandboxes besides the claimed one, want the pool's 2: %v", len(pool), pool)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := b.WarmPoolReady(); n != 0 {
		t.Errorf("warm pool holds %d sandboxes after Close", n)
	}
	// Close ended every pool sandbox: processes gone, directories gone.
	waitGone(t, "after Backend.Close", pids)
	for _, id := range pool {
		if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pool sandbox %s directory still there after Close: %v", id, err)
		}
		if _, err := b.Attach(ctx, id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
			t.Errorf("Attach to pool sandbox %s after Close: %v, want ErrSandboxNotFound", id, err)
		}
	}
	mustOK(t, claimed, goruntime.Request{Command: "echo the claimed sandbox lives on"})
	after := openSession(t, b) // started, not claimed
	mustOK(t, after, goruntime.Request{Command: "true"})
	time.Sleep(500 * time.Millisecond)
	if n := b.WarmPoolReady(); n != 0 {
		t.Errorf("the pool refilled after Close: %d sandboxes", n)
	}
}

// heldSandboxes keeps the helper's claimed sandboxes reachable.
var heldSandboxes []goruntime.Sandbox

// poolHelper is the helper mode "pool-wait": a backend with a warm pool of
// two, filled; it prints the pool sandboxes' IDs, one a line, then "ready",
// and waits to be killed.
func poolHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = 2
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := b.Prepare(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for b.WarmPoolReady() < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	// Claim both and let the pool refill: the claimed ones are this
	// process's too, and the pool holds two more.
	for range 2 {
		sb, err := b.Open(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Referenced until the process dies: a dropped Sandbox's lifeline
		// is closed by its finalizer, which ends the sandbox.
		heldSandboxes = append(heldSandboxes, sb)
	}
	for b.WarmPoolReady() < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	ids, _ := b.List()
	for _, id := range ids {
		fmt.Println(id)
	}
	fmt.Println("ready")
	select {}
}

// TestWarmPoolDiesWithOwner: a process with a warm pool is SIGKILLed; the
// sandboxes in its pool (and those it claimed) end with it, and the next
// backend on the state directory removes what they left on disk.
func TestWarmPoolDiesWithOwner(t *testing.T) {
	b := newBackend(t, testOptions())
	before, _ := b.List()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=pool-wait", "LOCAL_TEST_SERVER="+serverPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var ids, seen []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		id := sc.Text()
		if !slices.Contains(before, id) {
			pid := 0
			if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json")); err == nil {
				pid = sandboxPID(t, b.StateDir(), id)
			}
			seen = append(seen, fmt.Sprintf("%s(pid %d, parent %d)", id, pid, parentOf(pid)))
		}
		if slices.Contains(before, id) {
			continue
		}
		// Only started sandboxes have a state file (a directory without
		// one is a start in flight); the helper started its own.
		if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json")); err == nil &&
			parentOf(sandboxPID(t, b.StateDir(), id)) == cmd.Process.Pid {
			ids = append(ids, id)
		}
	}
	if len(ids) < 4 {
		t.Fatalf("helper (pid %d) owns %d sandboxes (%v), want 4: two claimed, two waiting in its pool; new in the state directory: %v",
			cmd.Process.Pid, len(ids), ids, seen)
	}
	var pids []int
	var cgroupDirs []string
	for _, id := range ids {
		pids = append(pids, sandboxPID(t, b.StateDir(), id))
		cgroupDirs = append(cgroupDirs, sandboxCgroups(t, b.StateDir(), id)...)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, "after the owner was killed", pids)
	// A new backend prunes the dead sandboxes' directories.
	b2, err := local.New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close(context.Background())
	deadline := time.Now().Add(time.Minute)
	for _, id := range ids {
		for {
			_, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s of the killed owner still on disk after New pruned", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// And their cgroups, removed with their directories.
	for _, dir := range cgroupDirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s of the killed owner's sandbox left after New pruned (%v)", dir, err)
		}
	}
}

// sandboxCgroups reads the cgroup directories of sandbox id from its
// state file.
func sandboxCgroups(tb testing.TB, stateDir, id string) []string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "sandbox.json"))
	if err != nil {
		tb.Fatalf("sandbox %s state: %v", id, err)
	}
	var m struct {
		Cgroup struct{ Memory, Pids, CPU string } `json:"cgroup"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Cgroup.Memory == "" {
		tb.Fatalf("sandbox %s state: cgroup %+v, %v", id, m.Cgroup, err)
	}
	var dirs []string
	for _, d := range []string{m.Cgroup.Memory, m.Cgroup.Pids, m.Cgroup.CPU} {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// TestWarmPoolLimits: a sandbox claimed from the pool runs under the
// backend's limits like any other: memory and process bombs are contained
// and reported.
func TestWarmPoolLimits(t *testing.T) {
	opts := poolOptions(1)
	opts.MemoryBytes = 384 << 20
	opts.Processes = 64
	b := newBackend(t, opts)
	waitPool(t, b, 1)
	before, _ := b.List()
	s := openSession(t, b)
	if !slices.Contains(before, s.ID()) {
		t.Fatalf("Open started sandbox %s instead of claiming the pool's", s.ID())
	}
	res := run(t, s, goruntime.Request{Command: memoryBomb, Timeout: time.Minute})
	if res.Outcome != goruntime.OutcomeMemoryLimit {
		t.Errorf("memory bomb in a pool sandbox: outcome %s (exit %d, stderr %.300s), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeMemoryLimit)
	}
	// The pool refilled: a second claimed sandbox for the fork bomb.
	waitPool(t, b, 1)
	before, _ = b.List()
	s2 := openSession(t, b)
	if !slices.Contains(before, s2.ID()) {
		t.Fatalf("Open started sandbox %s instead of claiming the pool's", s2.ID())
	}
	res = run(t, s2, goruntime.Request{Command: forkBomb, Timeout: 20 * time.Second})
	if res.Outcome != goruntime.OutcomeProcessLimit {
		t.Errorf("fork bomb in a pool sandbox: outcome %s (exit %d, stderr %.300s), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeProcessLimit)
	}
	mustOK(t, s2, goruntime.Request{Command: "echo after the bomb"})
	res = mustOK(t, s, goruntime.Request{Command: "echo $GOMEMLIMIT $GOMAXPROCS"})
	if want := strconv.FormatInt(opts.MemoryBytes/10*9, 10); !strings.HasPrefix(res.Stdout, want+" ") {
		t.Errorf("GOMEMLIMIT in a pool sandbox: %q, want %s", res.Stdout, want)
	}
}

// startedBesides lists the sandboxes this process started but those
// named: a pool start writes its state file before its warm-up command
// runs, so a start in flight counts.
func startedBesides(b *local.Backend, ids ...string) []string {
	var out []string
	all, _ := b.List()
	for _, id := range all {
		data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
		var m struct {
			PID int `json:"pid"`
		}
		if slices.Contains(ids, id) || err != nil || json.Unmarshal(data, &m) != nil {
			continue
		}
		if parentOf(m.PID) == os.Getpid() {
			out = append(out, id)
		}
	}
	return out
}

// TestWarmPoolRefillAfterFirstCommand: the refill after a claim waits for
// the claiming session's first command to end (it would otherwise start a
// sandbox beside that command), then fills the pool.
func TestWarmPoolRefillAfterFirstCommand(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	waitPool(t, b, 1)
	s := openSession(t, b)
	ours := func() []string { return startedBesides(b, s.ID()) }
	if got := ours(); len(got) != 0 {
		t.Fatalf("sandboxes %v of this process besides the claimed one, before its first command", got)
	}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustOK(t, s, goruntime.Request{Command: "sleep 0.7"})
	}()
	var during []string
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if during == nil {
				during = ours()
			}
		}
	}
	// The refill waits at most 2 s (poolRefillDelay) for the command.
	if took := time.Since(start); took > 1800*time.Millisecond {
		t.Skipf("the first command took %v, too close to the refill's 2 s bound to tell the two apart", took)
	}
	if len(during) > 0 {
		t.Errorf("pool started %v while the claimed session's first command ran", during)
	}
	waitPool(t, b, 1)
}

// TestWarmPoolFillPausesForFirstCommand: a filler that runs while a
// claimed sandbox's first command runs stops once the pool holds one
// ready sandbox, and fills the rest when that command has ended (a fresh
// process's first call otherwise ran beside two starts). The test holds
// the start slots, so no start ends while it looks, and reads the pool's
// starts and its settling claims in one snapshot: whenever a claim
// settles, the pool has at most one sandbox ready or starting.
func TestWarmPoolFillPausesForFirstCommand(t *testing.T) {
	b := newBackend(t, poolOptions(2))
	waitPool(t, b, 2)
	busy, idle := openSession(t, b), openSession(t, b) // the pool is empty; neither has settled
	release := local.HoldStarts(b)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Runs until cancelled: busy settles by its claim's 2 s bound.
		_, _ = busy.Execute(ctx, goruntime.Request{Command: "sleep 600"})
	}()
	// idle's end (Close's first step) settles it: the filler starts, with
	// busy still settling. The test looks meanwhile: busy settles by its
	// claim's 2 s bound, which a slow Close could outlast.
	closed := make(chan error, 1)
	go func() { closed <- idle.Close(context.Background()) }()
	seen := false
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		ready, starting, settling := local.WarmPoolState(b)
		if settling == 0 {
			break
		}
		if ready+starting > 1 {
			t.Fatalf("while a claimed session settled the pool had %d sandboxes ready and %d starting, want 1 in all (an empty pool refills; a second start waits)", ready, starting)
		}
		seen = seen || starting == 1
		if time.Now().After(deadline) {
			t.Fatal("a claimed session still settles a minute after its claim")
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Skip("the claimed session settled before the test saw the pool's first start")
	}
	// Settled (its 2 s bound, the command still running): the pool fills
	// the rest.
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStarting(b) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the claims settled, %d pool starts under way, want 2", local.WarmPoolStarting(b))
		}
	}
	release()
	cancel()
	<-done
	waitPool(t, b, 2)
}
