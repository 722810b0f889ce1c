package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// heldSandboxes keeps the helper's claimed sandboxes reachable.
var heldSandboxes []goruntime.Sandbox

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
