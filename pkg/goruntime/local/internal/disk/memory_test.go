package disk

import (
	"context"
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
	sp := Spec{Bytes: 8 << 20, Inodes: 500, Seed: seed, Layout: Layout{Dirs: []string{"app", "home", "home/cache"}, Cache: "home/cache"}}
	a, err := MemoryCommand(Memory(mnt), sp)
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
		if _, err := MemoryCommand(Memory(c.dir), Spec{Seed: c.seed}); err == nil || !strings.Contains(err.Error(), "Options.StateDir") {
			t.Errorf("MemoryCommand(%q, seed %q) = %v, want a refusal naming Options.StateDir", c.dir, c.seed, err)
		}
	}
}
