package disk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
)

// TestMain makes this test binary the gate of the memory disks its tests
// make (package gate), as the runtime server's binary is the backend's.
func TestMain(m *testing.M) {
	if gate.Requested(os.Getenv) {
		os.Exit(gate.Main(os.Args[1:], os.Environ(), os.Stderr))
	}
	os.Exit(m.Run())
}

// onTestMemoryDisk runs command on memory disk g in ns, with this test
// binary as the gate.
func onTestMemoryDisk(t *testing.T, g gate.Disk, ns *gate.UserNS, command ...string) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return onMemoryDisk(context.Background(), exe, []string{"PATH=/usr/bin:/bin"}, g, ns, command...)
}

// TestMemoryDisk makes a memory disk of 8 MiB and 500 inodes as
// MemoryPlan lays it out and fills it past both caps: the writes past
// them fail with ENOSPC, and the seed's overlay shows the seed's files.
func TestMemoryDisk(t *testing.T) {
	dir := t.TempDir()
	seed, mnt := filepath.Join(dir, "seed"), filepath.Join(dir, "disk")
	if out, err := exec.Command("mkdir", "-p", seed+"/00", mnt).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("sh", "-c", "echo seeded > "+seed+"/00/entry && chmod -R a-w "+seed).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// A read-only seed, as the backend's is; writable again before
	// TempDir's removal, which a user other than root needs.
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", seed).Run() })
	sp := Spec{Bytes: 8 << 20, Inodes: 500, Seed: seed, Layout: Layout{Dirs: []string{"app", "home", "home/cache"}, Cache: "home/cache"}}
	g, ns, err := MemoryPlan(Memory(mnt), sp, Identity{})
	if err != nil {
		t.Fatal(err)
	}
	probe := `cd "$0" && cat home/cache/00/entry && echo new > home/cache/00/mine && cat home/cache/00/mine && cat home/cache/trim.txt &&
dd if=/dev/zero of=app/big bs=1M count=16 2>&1 | grep -o 'No space left on device' | head -1; rm app/big;
mkdir app/many && cd app/many && for i in $(seq 600); do { true > f$i; } 2>/dev/null || { echo "inodes out at $i"; break; }; done`
	out, err := onTestMemoryDisk(t, g, ns, "/bin/sh", "-c", probe, mnt)
	if err != nil {
		t.Fatalf("memory disk: %v: %s", err, out)
	}
	for _, want := range []string{"seeded\n", "new\n", g.Files[0].Data, "No space left on device", "inodes out at"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("memory disk: output %q lacks %q", out, want)
		}
	}
	if out, _ := exec.Command("cat", seed+"/00/entry").CombinedOutput(); string(out) != "seeded\n" {
		t.Errorf("the seed changed: %q", out)
	}
}

// TestMemoryPlanRefusesOverlayCharacters: a path overlayfs's options
// cannot carry is refused with the fix.
func TestMemoryPlanRefusesOverlayCharacters(t *testing.T) {
	for _, c := range []struct{ seed, dir string }{{"/s,x", "/d"}, {"/s", "/d:x"}} {
		if _, _, err := MemoryPlan(Memory(c.dir), Spec{Seed: c.seed}, Identity{}); err == nil || !strings.Contains(err.Error(), "Options.StateDir") {
			t.Errorf("MemoryPlan(%q, seed %q) = %v, want a refusal naming Options.StateDir", c.dir, c.seed, err)
		}
	}
}

// TestMemoryDiskOwnIDs: with host ids of its own (subordinate ids, here
// granted to root by an /etc/subuid and /etc/subgid of the test's own,
// which newuidmap and newgidmap see bound over the real ones in a mount
// namespace of their own), the command runs as InnerID mapped to those
// ids with no capability left, owns the layout's directories and the
// overlay's, reads a staged directory of the caller's that it could not
// reach by its path, and cannot write to the disk's root.
func TestMemoryDiskOwnIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it binds its own /etc/subuid over the real one")
	}
	for _, tool := range []string{"unshare", "newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here (Debian's uidmap, util-linux)", tool)
		}
	}
	dir := t.TempDir() // 0700: closed to the sandbox's ids
	seed, private := filepath.Join(dir, "seed"), filepath.Join(dir, "private")
	// The disk's mount point is one the sandbox's ids reach, as the
	// backend's is (under /tmp).
	open, err := os.MkdirTemp("", "memdisk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(open, "disk")
	subids := filepath.Join(dir, "subids")
	if out, err := exec.Command("mkdir", "-p", seed+"/00", mnt, private).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for p, body := range map[string]string{seed + "/00/entry": "seeded\n", private + "/secret": "staged\n", subids: "root:300000:65536\n"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// newuidmap and newgidmap read the test's subordinate ids.
	id := Identity{UID: 300007, GID: 300007, Stage: []Staged{{Src: private, Name: "private"}}}
	for _, h := range []struct {
		path *string
		name string
	}{{&id.NewUIDMap, "newuidmap"}, {&id.NewGIDMap, "newgidmap"}} {
		tool, _ := exec.LookPath(h.name)
		*h.path = filepath.Join(dir, h.name)
		wrap := fmt.Sprintf("#!/bin/sh\nexec unshare --mount --propagation private /bin/sh -c 'mount --bind %s /etc/subuid && mount --bind %s /etc/subgid && exec %s \"$@\"' %s \"$@\"\n", subids, subids, tool, h.name)
		if err := os.WriteFile(*h.path, []byte(wrap), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sp := Spec{Bytes: 8 << 20, Inodes: 500, Seed: seed, Layout: Layout{Dirs: []string{"app", "home", "home/cache"}, Cache: "home/cache"}}
	d := Memory(mnt)
	g, ns, err := MemoryPlan(d, sp, id)
	if err != nil {
		t.Fatal(err)
	}
	probe := `cd "$0" && id -u && id -g && cat /proc/self/uid_map && grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status && cat home/cache/00/entry && echo new > home/cache/00/mine &&
echo mine > app/file && stat -c '%u %a' app home/cache/00 && cat "$1/secret" && { { echo x > stray; } 2>/dev/null && echo root-writable || echo root-closed; }`
	out, err := onTestMemoryDisk(t, g, ns, "/bin/sh", "-c", probe, mnt, d.StagePath("private"))
	if err != nil {
		t.Fatalf("memory disk with ids of its own: %v: %s", err, out)
	}
	for _, want := range []string{"1000\n1000\n", "1000     300007          1", "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n", "CapAmb:\t0000000000000000", "seeded\n", "1000 711\n1000 711\n", "staged\n", "root-closed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("memory disk with ids of its own: output %q lacks %q", out, want)
		}
	}
}
