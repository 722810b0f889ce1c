package local_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestDiskLeavesHost: a live root sandbox's disk is mounted in its own
// mount namespace only. The host's mount table does not hold it (so the
// host's mounts do not grow with the live sandboxes: every mount
// namespace made copies them, and a start with 1,000 live took 7 times
// as long), nor does another sandbox's namespace; the host still reaches
// its files through Dir(), a backend of another process attaches to it,
// and once it is closed the kernel frees its loop device.
func TestDiskLeavesHost(t *testing.T) {
	localtest.RequireDiskImage(t)
	state := freshState(t)
	opts := testOptions()
	opts.StateDir = state
	b := newBackend(t, opts)
	a, c := openSession(t, b), openSession(t, b)
	mustOK(t, a, goruntime.Request{Files: []goruntime.File{{Path: "kept.txt", Data: []byte("kept")}}, Command: "true"})
	sa, sc := a.Sandbox().(*local.Sandbox), c.Sandbox().(*local.Sandbox)
	ma, mc := readMeta(t, sa), readMeta(t, sc)
	if ma.Disk == nil || mc.Disk == nil || !ma.Disk.LeftHost {
		t.Fatalf("sandbox.json names no disk that left the host: %+v", ma)
	}

	if host := mountPoints(t, "/proc/self/mountinfo"); slices.Contains(host, ma.Disk.Dir) {
		t.Errorf("the host's mount table holds live sandbox A's disk %s", ma.Disk.Dir)
	}
	own := mountPoints(t, "/proc/"+strconv.Itoa(ma.PID)+"/mountinfo")
	if !slices.Contains(own, ma.Disk.Dir) {
		t.Fatalf("sandbox A's disk %s is not mounted in its own mount namespace: %q", ma.Disk.Dir, own)
	}
	other := mountPoints(t, "/proc/"+strconv.Itoa(mc.PID)+"/mountinfo")
	if slices.Contains(other, ma.Disk.Dir) {
		t.Errorf("sandbox C's mount namespace holds sandbox A's disk %s", ma.Disk.Dir)
	}
	if data, err := os.ReadFile(filepath.Join(sa.Dir(), "app", "kept.txt")); err != nil || string(data) != "kept" {
		t.Errorf("the host reads %q (%v) of the sandbox's file through Dir()", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(sa.Dir(), "log", "server.log")); err != nil || len(data) == 0 {
		t.Errorf("the host reads %d bytes (%v) of the server's log through Dir()", len(data), err)
	}

	b2 := newBackend(t, opts)
	a2, err := goruntime.Attach(context.Background(), b2, a.ID(), goruntime.Options{})
	if err != nil {
		t.Fatalf("attach from another backend: %v", err)
	}
	if res := mustOK(t, a2, goruntime.Request{Command: "cat kept.txt && echo more >> kept.txt"}); res.Stdout != "kept" {
		t.Errorf("attached, the sandbox's file reads %q", res.Stdout)
	}
	if err := a2.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}

	recs := []hostleaks.Sandbox{record(t, sa), record(t, sc)}
	for _, s := range []*goruntime.Session{a, c} {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if leaks := leaksAfter(state, recs, true); len(leaks) > 0 {
		t.Fatalf("after closing both sandboxes the host still holds:\n%s", strings.Join(leaks, "\n"))
	}
}

// mountPoints lists the mount points of a mount table (our mount points
// need no unescaping).
func mountPoints(t *testing.T, mountinfo string) []string {
	t.Helper()
	f, err := os.Open(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			out = append(out, fields[4])
		}
	}
	return out
}
