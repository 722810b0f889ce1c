package disk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// requireDiskImages skips t where this host cannot make disk images.
func requireDiskImages(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a disk image needs root")
	}
	if detail, fix := HostProblem(); detail != "" {
		t.Skipf("%s: %s", detail, fix)
	}
}

// TestDisksFromTemplate makes two disks of one kind as root: both come
// from one template image (made once), stay sparse, are mounted with the
// layout, the seed's overlay and the options Make promises, hold what is
// written to each apart, and are freed, loop devices included, by Remove.
func TestDisksFromTemplate(t *testing.T) {
	requireDiskImages(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	if err := os.MkdirAll(filepath.Join(seed, "00"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "00", "entry"), []byte("seeded"), 0o444); err != nil {
		t.Fatal(err)
	}
	sp := Spec{Images: filepath.Join(dir, "images"), Mounts: filepath.Join(dir, "mounts"), Bytes: 64 << 20, Inodes: 2000, Seed: seed,
		Layout: Layout{Dirs: []string{"etc", "app", "home", "home/cache"}, Public: []string{"etc"}, Cache: "home/cache"}}
	ctx := context.Background()
	var disks []Disk
	for _, id := range []string{"0000000000000001", "0000000000000002"} {
		d, err := Make(ctx, id, sp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Remove() })
		disks = append(disks, d)
	}
	templates, _ := filepath.Glob(filepath.Join(sp.Images, "template-*.img"))
	if len(templates) != 1 {
		t.Fatalf("templates %q, want one for both disks", templates)
	}
	for i, d := range disks {
		if !d.Complete(sp.Layout) {
			t.Fatalf("disk %d is not mounted and laid out", i)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(d.Image, &st); err != nil {
			t.Fatal(err)
		}
		if used := st.Blocks * 512; used > 8<<20 {
			t.Errorf("disk %d's image holds %d bytes of its 64 MiB: not sparse", i, used)
		}
		if fi, err := os.Stat(filepath.Join(d.Dir, "etc")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("disk %d's etc: %v, %v; want mode 0755", i, fi, err)
		}
		if data, err := os.ReadFile(filepath.Join(d.Dir, "home/cache/00/entry")); err != nil || string(data) != "seeded" {
			t.Errorf("disk %d's cache shows %q, %v; want the seed's entry", i, data, err)
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == d.Dir {
				for _, opt := range []string{"nosuid", "nodev", "discard"} {
					if !strings.Contains(line, opt) {
						t.Errorf("disk %d mounted without %s: %s", i, opt, line)
					}
				}
			}
		}
	}
	if err := os.WriteFile(filepath.Join(disks[0].Dir, "app", "mine"), []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(disks[1].Dir, "app", "mine")); !os.IsNotExist(err) {
		t.Errorf("a file written on one disk shows on the other: %v", err)
	}
	for _, d := range disks {
		if err := d.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if loops := LoopDevices("/sys/block", sp.Images); len(loops) > 0 {
		t.Errorf("loop devices still attached to the images after Remove: %q", loops)
	}
}

// TestDisksAtOnce makes 64 disks at once, as an MCP server opening a
// sandbox for each of hundreds of sessions does: every Make gets a loop
// device of its own, though LOOP_CTL_GET_FREE names the same free one to
// all of them until one takes it (before, 10 tries each: 68 of 200
// sessions failed with "attach ... device or resource busy").
func TestDisksAtOnce(t *testing.T) {
	requireDiskImages(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	if err := os.MkdirAll(seed, 0o755); err != nil {
		t.Fatal(err)
	}
	sp := Spec{Images: filepath.Join(dir, "images"), Mounts: filepath.Join(dir, "mounts"), Bytes: 16 << 20, Inodes: 500, Seed: seed,
		Layout: Layout{Dirs: []string{"app", "cache"}, Cache: "cache"}}
	const n = 64
	errs := make(chan error, n)
	disks := make(chan Disk, n)
	for i := range n {
		go func() {
			d, err := Make(context.Background(), fmt.Sprintf("%016x", i+1), sp)
			if err == nil {
				disks <- d
			}
			errs <- err
		}()
	}
	failed := 0
	for range n {
		if err := <-errs; err != nil {
			failed++
			t.Log(err)
		}
	}
	close(disks)
	for d := range disks {
		if err := d.Remove(); err != nil {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d disks made at once failed", failed, n)
	}
}

// TestPruneTemplateBuilds: a template build killed midway (its directory,
// its file system still mounted) is unmounted and removed, but not while
// a build holds a template's lock, and a finished template stays.
func TestPruneTemplateBuilds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a leftover needs root")
	}
	images := t.TempDir()
	build := filepath.Join(images, "template-123")
	mnt := filepath.Join(build, "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	done := filepath.Join(images, "template-abc.img")
	for _, f := range []string{done, done + ".lock"} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.OpenFile(done+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	PruneTemplateBuilds(images) // a build holds a lock: nothing goes
	if !isMountPoint(mnt) {
		t.Fatal("a build directory was unmounted while a template's lock was held")
	}
	lock.Close()
	PruneTemplateBuilds(images)
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("the killed build's directory is still there: %v (mounted: %v)", err, isMountPoint(mnt))
	}
	if _, err := os.Stat(done); err != nil {
		t.Errorf("the finished template went too: %v", err)
	}
}
