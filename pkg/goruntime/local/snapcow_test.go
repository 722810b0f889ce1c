package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestSnapshotLayers: as root, a snapshot is a tree that sandboxes made
// from it are layered on (method overlay, /app an overlay). Those
// sandboxes share the tree and nothing else: a write, a delete, a chmod
// and a rename in one are invisible to another, to a sandbox opened from
// the snapshot afterwards, and to the snapshot; a fork of a layered
// sandbox holds its changes; a snapshot deleted while sandboxes are
// layered on it is gone for its owner at once, and its tree with the
// last of them.
func TestSnapshotLayers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layered snapshots need root (as a user they are copies: TestSnapshotsAsUser)")
	}
	ctx, b, orig := newLayeredRig(t, -1)
	must := func(sb goruntime.Sandbox, cmd string) string {
		t.Helper()
		out, err := snapRun(ctx, sb, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	must(orig, `mkdir -p t && cd t && echo a >a && echo b >b && echo c >c && echo d >d && chmod 644 c && echo home >"$HOME/marker"`)
	want := must(orig, stateCmd)
	snap, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Method != "overlay" {
		t.Fatalf("snapshot method %q as root, want overlay", snap.Method)
	}
	open := func() goruntime.Sandbox {
		t.Helper()
		sb, err := b.OpenSnapshot(ctx, snapOwner, snap.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(ctx) })
		return sb
	}
	one, two := open(), open()
	// Layered, and the snapshot's files are the sandbox's own.
	if got := must(one, `stat -f -c %T /app; stat -c %u t/a; id -u`); !strings.HasPrefix(got, "overlayfs\n") ||
		strings.Fields(got)[1] != strings.Fields(got)[2] {
		t.Fatalf("a sandbox from the snapshot: file system, owner of a file, own uid: %q; want overlayfs and the file its own", got)
	}
	must(one, `echo A >t/a && rm t/b && chmod 600 t/c && mv t/d t/z && echo mine >"$HOME/marker"`)
	changed := "a 644 A\nc 600 c\nz 644 d\nmine\n"
	if got := must(one, stateCmd); got != changed {
		t.Fatalf("the sandbox that changed its files: %q, want %q", got, changed)
	}
	if got := must(two, stateCmd); got != want {
		t.Fatalf("another sandbox from the same snapshot: %q, want %q", got, want)
	}
	if got := must(open(), stateCmd); got != want {
		t.Fatalf("a sandbox opened from the snapshot afterwards: %q, want %q", got, want)
	}
	if got := must(orig, stateCmd); got != want {
		t.Fatalf("the original: %q, want %q", got, want)
	}
	// A fork of a layered sandbox holds its changes.
	forks, err := b.Fork(ctx, snapOwner, one, goruntime.ForkSpec{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range forks {
		if f.Err != nil {
			t.Fatalf("fork %d: %v", i, f.Err)
		}
		defer f.Sandbox.Close(ctx)
		if got := must(f.Sandbox, stateCmd); got != changed {
			t.Fatalf("fork %d of a layered sandbox: %q, want %q", i, got, changed)
		}
	}
	must(forks[0].Sandbox, `rm t/a`)
	if got := must(forks[1].Sandbox, stateCmd); got != changed {
		t.Fatalf("a fork after its sibling deleted a file: %q, want %q", got, changed)
	}
	// A fork rolled back to the snapshot it is layered on.
	if err := b.Restore(ctx, snapOwner, forks[0].Sandbox, snap.ID); err != nil {
		t.Fatalf("restore a layered sandbox: %v", err)
	}
	if got := must(forks[0].Sandbox, stateCmd); got != want {
		t.Fatalf("a layered sandbox restored: %q, want %q", got, want)
	}
	// Deleted while layered: gone for its owner, kept for its sandboxes.
	if err := b.DeleteSnapshot(ctx, snapOwner, snap.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := b.ListSnapshots(ctx, snapOwner); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v, %v; want none", list, err)
	}
	if got := must(two, stateCmd); got != want {
		t.Fatalf("a sandbox on a deleted snapshot: %q, want %q", got, want)
	}
	trees := func() int {
		m, _ := filepath.Glob(filepath.Join(b.StateDir(), "snapshots", "*", snap.ID))
		return len(m)
	}
	if trees() != 1 {
		t.Fatalf("the deleted snapshot's tree is gone while sandboxes are layered on it")
	}
	for _, sb := range []goruntime.Sandbox{one, two} {
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if trees() != 1 {
		t.Fatal("the deleted snapshot's tree is gone while a sandbox opened from it lives")
	}
}

// TestSnapshotLayersShareDisk: forks hold the files they share with
// their original once, off their own disks.
func TestSnapshotLayersShareDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layered snapshots need root")
	}
	ctx, b, orig := newLayeredRig(t, -1)
	const big = 8 << 20
	if _, err := snapRun(ctx, orig, fmt.Sprintf(`head -c %d /dev/urandom >big`, big)); err != nil {
		t.Fatal(err)
	}
	// What the file system under /app holds (for an overlay: its upper
	// directory's, the sandbox's own disk).
	used := func(sb goruntime.Sandbox) int64 {
		t.Helper()
		out, err := snapRun(ctx, sb, `stat -f -c '%b %f %S' /app`)
		if err != nil {
			t.Fatal(err)
		}
		var blocks, free, size int64
		if _, err := fmt.Sscan(out, &blocks, &free, &size); err != nil {
			t.Fatalf("stat -f: %q: %v", out, err)
		}
		return (blocks - free) * size
	}
	own := used(orig)
	forks, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range forks {
		if f.Err != nil {
			t.Fatalf("fork %d: %v", i, f.Err)
		}
		defer f.Sandbox.Close(ctx)
		if out, err := snapRun(ctx, f.Sandbox, `wc -c <big`); err != nil || strings.TrimSpace(out) != fmt.Sprint(big) {
			t.Fatalf("fork %d: big holds %q, %v", i, out, err)
		}
		if n := used(f.Sandbox); n > own-big/2 {
			t.Fatalf("fork %d's disk holds %d bytes, its original's %d with an %d-byte file: want the file held off the fork's disk", i, n, own, big)
		}
	}
}
