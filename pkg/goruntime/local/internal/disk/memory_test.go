package disk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryDisk makes a memory disk of 8 MiB and 500 inodes as
// MemoryCommand lays it out and fills it past both caps: the writes past
// them fail with ENOSPC, and the seed's overlay shows the seed's files.
func TestMemoryDisk(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare here")
	}
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
	a, err := MemoryCommand(Memory(mnt), sp, Identity{})
	if err != nil {
		t.Fatal(err)
	}
	probe := `cd "$0" && cat home/cache/00/entry && echo new > home/cache/00/mine && cat home/cache/00/mine &&
dd if=/dev/zero of=app/big bs=1M count=16 2>&1 | grep -o 'No space left on device' | head -1; rm app/big;
mkdir app/many && cd app/many && for i in $(seq 600); do { true > f$i; } 2>/dev/null || { echo "inodes out at $i"; break; }; done`
	out, err := exec.CommandContext(context.Background(), a[0], append(a[1:], "/bin/sh", "-c", probe, mnt)...).CombinedOutput()
	if err != nil {
		t.Fatalf("memory disk: %v: %s", err, out)
	}
	for _, want := range []string{"seeded\n", "new\n", "No space left on device", "inodes out at"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("memory disk: output %q lacks %q", out, want)
		}
	}
	if out, _ := exec.Command("cat", seed+"/00/entry").CombinedOutput(); string(out) != "seeded\n" {
		t.Errorf("the seed changed: %q", out)
	}
}

// TestMemoryCommandRefusesOverlayCharacters: a path overlayfs's options
// cannot carry is refused with the fix.
func TestMemoryCommandRefusesOverlayCharacters(t *testing.T) {
	for _, c := range []struct{ seed, dir string }{{"/s,x", "/d"}, {"/s", "/d:x"}} {
		if _, err := MemoryCommand(Memory(c.dir), Spec{Seed: c.seed}, Identity{}); err == nil || !strings.Contains(err.Error(), "Options.StateDir") {
			t.Errorf("MemoryCommand(%q, seed %q) = %v, want a refusal naming Options.StateDir", c.dir, c.seed, err)
		}
	}
}

// TestMemoryDiskOwnIDs: with host ids of its own (subordinate ids, here
// granted to root by an /etc/subuid and /etc/subgid of the test's own,
// bound over the real ones in a mount namespace of its own), the command
// runs as InnerID mapped to those ids, owns the layout's directories and
// the overlay's, reads a staged directory of the caller's that it could
// not reach by its path, and cannot write to the disk's root.
func TestMemoryDiskOwnIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it binds its own /etc/subuid over the real one")
	}
	for _, tool := range []string{"unshare", "newuidmap", "newgidmap", "setpriv"} {
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
	sp := Spec{Bytes: 8 << 20, Inodes: 500, Seed: seed, Layout: Layout{Dirs: []string{"app", "home", "home/cache"}, Cache: "home/cache"}}
	d := Memory(mnt)
	a, err := MemoryCommand(d, sp, Identity{UID: 300007, GID: 300007, Stage: []Staged{{Src: private, Name: "private"}}})
	if err != nil {
		t.Fatal(err)
	}
	probe := `cd "$0" && id -u && id -g && cat /proc/self/uid_map && cat home/cache/00/entry && echo new > home/cache/00/mine &&
echo mine > app/file && stat -c '%u %a' app home/cache/00 && cat "$1/secret" && { { echo x > stray; } 2>/dev/null && echo root-writable || echo root-closed; }`
	wrap := `mount --bind "$1" /etc/subuid && mount --bind "$1" /etc/subgid && shift && exec "$@"`
	args := append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", wrap, "wrap", subids}, a...)
	args = append(args, "/bin/sh", "-c", probe, mnt, d.StagePath("private"))
	out, err := exec.Command("unshare", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("memory disk with ids of its own: %v: %s", err, out)
	}
	for _, want := range []string{"1000\n1000\n", "1000     300007          1", "seeded\n", "1000 711\n1000 711\n", "staged\n", "root-closed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("memory disk with ids of its own: output %q lacks %q", out, want)
		}
	}
}
