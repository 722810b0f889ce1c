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
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestWarmPoolCloseWaitsForDeadClaims: a pool sandbox that died while it
// waited (here: its processes SIGKILLed, as a machine-wide kill or the
// OOM killer does) is skipped by a claim and closed in the background;
// Backend.Close waits for that close too, so nothing of the sandbox is
// left in the state directory once Close returns.
func TestWarmPoolCloseWaitsForDeadClaims(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	waitPool(t, b, 1)
	ids := local.WarmPoolReadyIDs(b)
	if len(ids) != 1 {
		t.Fatalf("warm pool of 1 holds %v", ids)
	}
	id := ids[0]
	data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Keep []int `json:"keep"`
	}
	if err := json.Unmarshal(data, &m); err != nil || len(m.Keep) == 0 {
		t.Fatalf("sandbox %s state: keep %v, %v", id, m.Keep, err)
	}
	for _, pid := range m.Keep {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitGone(t, "killed pool sandbox", m.Keep)

	if got := local.WarmPoolClaim(b); got != "" {
		t.Fatalf("claimed sandbox %s from a pool whose one sandbox was killed", got)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead pool sandbox %s is still in the state directory after Backend.Close returned: %v", id, err)
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
