package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// diskMount is where the local backend mounts the disk named id.
func diskMount(id string) string { return filepath.Join("/run/go-runtime-sandbox/disks", id) }

// mounted reports whether p is a mount point (its device differs from its
// parent's).
func mounted(p string) bool {
	var a, b syscall.Stat_t
	if syscall.Lstat(p, &a) != nil || syscall.Lstat(filepath.Dir(p), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// pruneNow runs a New's prune for opts to completion: New starts it in the
// background and Close waits for background work.
func pruneNow(t *testing.T, opts local.Options) {
	t.Helper()
	b, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestOrphanDiskPruned: a spare disk whose image was deleted while it was
// mounted (its state directory removed with rm -rf, markers and all) is
// unmounted and its mount point removed by the next New, of any state
// directory; before this fix every test run with a temporary state
// directory left two loop-mounted disks behind for good.
func TestOrphanDiskPruned(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	b := newBackend(t, opts)
	openSession(t, b) // claims a disk; the spare pool refills behind it
	var id string
	deadline := time.Now().Add(time.Minute)
	for id == "" {
		groups, _ := filepath.Glob(filepath.Join(b.StateDir(), "disks", "spare", "*"))
		for _, g := range groups {
			markers, _ := os.ReadDir(g)
			for _, m := range markers {
				// Removing the marker claims the spare: nobody else takes it now.
				if id == "" && os.Remove(filepath.Join(g, m.Name())) == nil {
					id = m.Name()
				}
			}
		}
		if id == "" {
			if time.Now().After(deadline) {
				t.Fatal("no spare disk was made within a minute")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !mounted(diskMount(id)) {
		t.Fatalf("spare disk %s is not mounted at %s", id, diskMount(id))
	}
	if err := os.Remove(filepath.Join(b.StateDir(), "disks", id+".img")); err != nil {
		t.Fatal(err)
	}
	pruneNow(t, testOptions())
	if _, err := os.Lstat(diskMount(id)); !os.IsNotExist(err) {
		t.Errorf("orphan disk %s: mount point still there after a New's prune (mounted: %v, err %v)", id, mounted(diskMount(id)), err)
	}
}

// TestLiveDiskNotPruned: a live sandbox's disk is not pruned however old
// its image, so the sandbox keeps its files and can be attached to from
// another backend. (pruneDisks once looked live disks up by the wrong key
// and removed any whose image was ten minutes old.)
func TestLiveDiskNotPruned(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	b := newBackend(t, opts)
	s := openSession(t, b)
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "keep.txt", Data: []byte("kept")}}, Command: "true"})
	m := readMeta(t, s.Sandbox().(*local.Sandbox))
	if m.Disk == nil || m.PID == 0 {
		t.Fatalf("sandbox.json names no disk: %+v", m)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(m.Disk.Image, old, old); err != nil {
		t.Fatal(err)
	}
	pruneNow(t, opts)
	if _, err := os.Stat(m.Disk.Image); err != nil {
		t.Fatalf("a live sandbox's disk image was pruned: %v", err)
	}
	// Mounted in the sandbox's own mount namespace (TestDiskLeavesHost).
	if seen := fmt.Sprintf("/proc/%d/root%s", m.PID, m.Disk.Dir); !mounted(seen) {
		t.Fatalf("a live sandbox's disk was unmounted from %s", seen)
	}
	b2 := newBackend(t, opts)
	s2, err := goruntime.Attach(context.Background(), b2, s.ID(), goruntime.Options{})
	if err != nil {
		t.Fatalf("attach after a prune: %v", err)
	}
	defer s2.Disconnect(context.Background())
	if res := mustOK(t, s2, goruntime.Request{Command: "cat keep.txt"}); res.Stdout != "kept" {
		t.Errorf("after a prune the sandbox's file reads %q", res.Stdout)
	}
}
