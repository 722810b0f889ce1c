package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// freshState returns a new state directory for the test with this
// machine's seed build caches shared into it (shareSeed): a backend there
// starts sandboxes at once.
func freshState(t *testing.T) string {
	t.Helper()
	state := localtest.StateDir(t)
	shareSeed(t, filepath.Join(state, "seed"))
	return state
}

// leaksAfter is what hostleaks.Find still finds of state and recs after
// up to a minute: the kernel frees a loop device once the last mount
// namespace that held its file system (its sandbox's) is gone, shortly
// after the sandbox's processes end.
func leaksAfter(state string, recs []hostleaks.Sandbox, spares bool) []string {
	var leaks []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if leaks = hostleaks.Find(state, recs, spares); len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
	}
}

// record reads a running sandbox's record for hostleaks.
func record(t *testing.T, s *local.Sandbox) hostleaks.Sandbox {
	t.Helper()
	r, err := hostleaks.Record(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spareDisks lists the markers of the state directory's spare disks.
func spareDisks(state string) []string {
	m, _ := filepath.Glob(filepath.Join(state, "disks", "spare", "*", "*"))
	return m
}

// waitSpareDisks waits until the state directory has n spare disks.
func waitSpareDisks(t *testing.T, state string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(spareDisks(state)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("spare disks after a minute: %q, want %d", spareDisks(state), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLastCloseRemovesSpareDisks: the spare disks (a loop device and two
// mounts each) outlive a backend's Close while another backend uses the
// state directory, and are unmounted and deleted by the last one's.
func TestLastCloseRemovesSpareDisks(t *testing.T) {
	localtest.RequireDiskImage(t)
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	b1 := newBackend(t, opts)
	b2 := newBackend(t, opts)
	sb, err := b1.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitSpareDisks(t, state, 2) // Open refills them
	if err := b1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := spareDisks(state); len(got) != 2 {
		t.Fatalf("after the first of two backends closed, spare disks %q, want the 2 kept for the other", got)
	}
	if leaks := hostleaks.Find(state, nil, false); len(leaks) == 0 {
		t.Fatal("hostleaks found nothing while 2 spare disks are mounted: it cannot see them")
	}
	if err := b2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if leaks := hostleaks.Find(state, nil, false); len(leaks) > 0 {
		t.Fatalf("after the last backend closed, the host still holds:\n%s", strings.Join(leaks, "\n"))
	}
}

// TestCleanup: Cleanup refuses while a backend holds the state directory
// (naming its process) and while sandboxes run in it (naming them); with
// KillSandboxes it ends them, and then the host holds nothing of the
// directory: no process, mount, loop device, cgroup, uid lease, sandbox
// directory or spare; the seed stays, and a new backend opens sandboxes
// there.
func TestCleanup(t *testing.T) {
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	ctx := context.Background()
	b := newBackend(t, opts)
	var recs []hostleaks.Sandbox
	var ids []string
	for i := 0; i < 2; i++ {
		sb, err := b.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := sb.(*local.Sandbox)
		recs = append(recs, record(t, s))
		ids = append(ids, s.ID())
		// Left running, as an agent's sandbox between calls.
		t.Cleanup(func() { _ = s.Close(ctx) })
		if err := s.Disconnect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	_, err := local.Cleanup(ctx, local.CleanupOptions{StateDir: state})
	if !errors.Is(err, local.ErrStateDirInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("Cleanup while a backend holds the directory: %v; want ErrStateDirInUse naming process %d", err, os.Getpid())
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A process that exited without closing its sandbox or its backend:
	// a dead sandbox's directory, and spare disks nobody will unmount.
	exited := helper(t, "spares-exit", "LOCAL_TEST_STATE_DIR="+state)
	// An Open that died before its sandbox ran: a directory, no state file.
	half := randomID(t)
	if err := os.MkdirAll(filepath.Join(state, "sandboxes", half, "app"), 0o700); err != nil {
		t.Fatal(err)
	}
	// What the host holds now, seen from its own tables: the check below
	// can fail.
	before := strings.Join(hostleaks.Find(state, recs, false), "\n")
	want := []string{"process", "cgroup", "sandbox directory " + filepath.Join(state, "sandboxes", exited), half}
	if os.Geteuid() == 0 {
		want = append(want, "uid lease")
	}
	if os.Geteuid() == 0 && !localtest.Here().DiskQuota {
		// Loop-mounted disks, made ahead as spares; a user's memory disks
		// live and die with their sandbox's mount namespace.
		want = append(want, "loop device", "mount", "spare")
	}
	for _, w := range want {
		if !strings.Contains(before, w) {
			t.Errorf("before Cleanup, hostleaks does not see %q; it found:\n%s", w, before)
		}
	}
	_, err = local.Cleanup(ctx, local.CleanupOptions{StateDir: state})
	if !errors.Is(err, local.ErrStateDirInUse) {
		t.Fatalf("Cleanup with 2 sandboxes running: %v; want ErrStateDirInUse", err)
	}
	for _, id := range ids {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("Cleanup's refusal does not name running sandbox %s: %v", id, err)
		}
	}
	for _, r := range recs {
		if _, err := os.Stat(filepath.Join(state, "sandboxes", r.ID, "sandbox.json")); err != nil {
			t.Fatalf("the refused Cleanup touched sandbox %s: %v", r.ID, err)
		}
	}

	rep, err := local.Cleanup(ctx, local.CleanupOptions{StateDir: state, KillSandboxes: true})
	if err != nil {
		t.Fatalf("Cleanup --kill: %v", err)
	}
	t.Log(rep)
	// The exited process's sandboxes may still be on their way out.
	for _, id := range ids {
		if !slices.Contains(rep.Killed, id) {
			t.Errorf("report %+v: sandbox %s, left running, is not among those ended", rep, id)
		}
	}
	if rep.Sandboxes < 4 {
		t.Errorf("report %+v: want 4 or more sandboxes removed (ours, the exited process's and the half-made one)", rep)
	}
	if leaks := leaksAfter(state, recs, false); len(leaks) > 0 {
		t.Fatalf("after Cleanup the host still holds:\n%s", strings.Join(leaks, "\n"))
	}
	if seeds, _ := filepath.Glob(filepath.Join(state, "seed", "*", ".complete")); len(seeds) == 0 {
		t.Error("Cleanup removed the seed build cache")
	}

	b2 := newBackend(t, opts)
	s := openSession(t, b2)
	mustOK(t, s, goruntime.Request{Command: "echo ok"})
}
