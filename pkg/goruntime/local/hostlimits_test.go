package local_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// openFails opens a sandbox that must fail, within a minute (never a
// hang), with an error wrapping local.ErrHostLimit and
// goruntime.ErrUnavailable that names each of names.
func openFails(t *testing.T, b *local.Backend, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Open(ctx)
	if err == nil {
		_ = sb.Close(context.Background())
		t.Fatal("Open past the limit succeeded")
	}
	t.Log(err)
	if ctx.Err() != nil {
		t.Fatalf("Open past the limit hung for a minute: %v", err)
	}
	if !errors.Is(err, local.ErrHostLimit) || !errors.Is(err, goruntime.ErrUnavailable) {
		t.Errorf("Open past the limit: %v; want it to wrap ErrHostLimit and ErrUnavailable", err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("Open past the limit: %v; want it to name %q", err, n)
		}
	}
}

// onlySandboxes fails unless the state directory holds exactly the
// sandboxes of recs on the host: no directory, disk image or uid lease
// of a half-made one.
func onlySandboxes(t *testing.T, state string, recs []hostleaks.Sandbox) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(state, "sandboxes"))
	if len(entries) != len(recs) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("sandbox directories %q, want only the %d live ones", names, len(recs))
	}
	var leases, images int
	for _, l := range hostleaks.Find(state, nil, true) {
		switch {
		case strings.HasPrefix(l, "uid lease"):
			leases++
		case strings.HasPrefix(l, "loop device"):
			images++
		}
	}
	if os.Geteuid() == 0 && leases != len(recs) {
		t.Errorf("%d uid leases name the state directory, want %d (the live sandboxes')", leases, len(recs))
	}
	if !localtest.Here().DiskQuota && images != len(recs) {
		t.Errorf("%d loop devices back the state directory's disks (spares aside), want %d (the live sandboxes')", images, len(recs))
	}
}

// TestHostUIDRangeFull: with a range of two host uids, a third live
// sandbox is refused at once with an error naming the range and
// Options.HostUIDCount, and leaves nothing behind; closing one makes
// room.
func TestHostUIDRangeFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes run as host uids of their own only when the backend is root")
	}
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	// A range of its own: other backends on this machine lease from the
	// default one.
	opts.HostUIDBase, opts.HostUIDCount = 1_960_000_000+rand.IntN(1_000_000)*2, 2
	b := newBackend(t, opts)
	var recs []hostleaks.Sandbox
	var open []*local.Sandbox
	for i := 0; i < 2; i++ {
		s, _ := openRaw(t, b)
		open = append(open, s)
		recs = append(recs, record(t, s))
	}
	openFails(t, b, "host uid range full", "Options.HostUIDCount")
	if !localtest.Here().DiskQuota {
		// Each start topped up the spare disks when it ended; one still
		// being made has no spare marker yet and would count as a leak.
		waitSpareDisks(t, state, 2)
	}
	onlySandboxes(t, state, recs)
	if err := open[0].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	openRaw(t, b)
}

// TestLoopDevicesExhausted: when the host has no loop device left for a
// new sandbox disk (here: a limit of 1, with one attached), Open is
// refused at once with an error naming loop devices and max_loop, and
// leaves nothing behind.
func TestLoopDevicesExhausted(t *testing.T) {
	localtest.RequireDiskImage(t)
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	b := newBackend(t, opts)
	// One attached loop device of our own, whatever the host has.
	img := filepath.Join(t.TempDir(), "held.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	local.SetMaxLoopDevices(b, 1)
	openFails(t, b, "no free loop device", "max_loop")
	onlySandboxes(t, state, nil)
	if leaks := hostleaks.Find(state, nil, false); len(leaks) > 0 {
		t.Errorf("the refused Open left:\n%s", strings.Join(leaks, "\n"))
	}
}

// TestHostTasksExhausted: when one more sandbox would leave the host too
// few of its task table (here: a limit of 1, which the host is past),
// Open is refused at once with an error naming kernel.pid_max, and
// leaves nothing behind.
func TestHostTasksExhausted(t *testing.T) {
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	b := newBackend(t, opts)
	local.SetTaskLimit(b, 1)
	openFails(t, b, "kernel.pid_max", "tasks")
	onlySandboxes(t, state, nil)
	if leaks := hostleaks.Find(state, nil, false); len(leaks) > 0 {
		t.Errorf("the refused Open left:\n%s", strings.Join(leaks, "\n"))
	}
}

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: in /proc/self/status")
	return 0
}

// TestOpenHoldsNoThreadPerSandbox: a live sandbox holds no OS thread of
// the process that opened it (waiting for bubblewrap to exit once held
// one each: 1,000 threads for 1,000 sandboxes, and Go aborts a program
// past 10,000).
func TestOpenHoldsNoThreadPerSandbox(t *testing.T) {
	// Small sandboxes: as a user, 17 of the default size (2 GiB each with
	// the memory disk) are past the memory budget of half the host.
	opts := smallDisk(testOptions())
	opts.MemoryBytes = local.MinMemoryBytes
	b := newBackend(t, opts)
	openRaw(t, b) // the runtime's own threads for an Open, once
	before := threads(t)
	const n = 16
	for i := 0; i < n; i++ {
		openRaw(t, b)
	}
	if grown := threads(t) - before; grown >= n/2 {
		t.Errorf("%d live sandboxes added %d OS threads to the opening process; want fewer than %d", n, grown, n/2)
	}
}
