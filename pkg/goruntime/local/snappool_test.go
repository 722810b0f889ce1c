package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// newLayeredRig is the layered snapshot tests' start, as root: a
// backend on a state directory of the test's own (the machine's seed
// shared into it) with warmPool sandboxes in its pool (-1: none, as
// testOptions has it), and a sandbox opened from it; both close when
// the test ends.
func newLayeredRig(t *testing.T, warmPool int) (context.Context, *local.Backend, goruntime.Sandbox) {
	t.Helper()
	opts := testOptions()
	opts.StateDir = t.TempDir()
	opts.WarmPool = warmPool
	shareSeed(t, filepath.Join(opts.StateDir, "seed"))
	ctx := context.Background()
	b, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(ctx) })
	orig, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orig.Close(ctx) })
	return ctx, b, orig
}

// waitPoolHolds waits until b's warm pool holds n sandboxes or more.
func waitPoolHolds(t *testing.T, b *local.Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for b.WarmPoolReady() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool holds %d sandboxes after 3 min, want %d", b.WarmPoolReady(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSnapshotPoolForks: as root, forks and sandboxes opened from a
// snapshot are pool sandboxes layered over the snapshot while they run
// (snappool.go), and behave as sandboxes layered from the outset: a fork
// made right after a write holds it; forks are isolated from each other
// and from the original (a write, a delete, a chmod, a rename); each has
// an identity of its own (sandbox ID, /tmp); the runtime server serves
// the layered /app (files written and read through it), the build cache
// is writable and warm; nothing in a fork reaches the snapshot's tree;
// a pooled fork can be snapshotted, forked and restored in turn.
func TestSnapshotPoolForks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layered snapshots need root (as a user they are copies: TestSnapshotsAsUser)")
	}
	ctx, b, orig := newLayeredRig(t, 2)
	must := func(sb goruntime.Sandbox, cmd string) string {
		t.Helper()
		out, err := snapRun(ctx, sb, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	must(orig, `cat >main.go <<'X'
package main

import "fmt"

func main() { fmt.Println("one") }
X
cat >go.mod <<'X'
module example.com/p

go 1.21
X
go build -o /tmp/p . && /tmp/p && echo orig >/tmp/mine`)
	waitPoolHolds(t, b, 2)
	// Written, then forked at once.
	must(orig, `mkdir -p t && cd t && echo a >a && echo b >b && echo c >c && echo d >d && chmod 644 c && echo home >"$HOME/marker"`)
	want := must(orig, stateCmd)
	forks, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{orig.ID(): true}
	for i, f := range forks {
		if f.Err != nil {
			t.Fatalf("fork %d: %v", i, f.Err)
		}
		defer f.Sandbox.Close(ctx)
		if !local.LayeredInPlace(f.Sandbox) {
			t.Fatalf("fork %d with 2 sandboxes ready in the pool: not a pool sandbox layered in place", i)
		}
		if ids[f.Sandbox.ID()] {
			t.Fatalf("fork %d has the ID %s of another sandbox", i, f.Sandbox.ID())
		}
		ids[f.Sandbox.ID()] = true
		if got := must(f.Sandbox, stateCmd); got != want {
			t.Fatalf("fork %d right after a write: %q, want %q", i, got, want)
		}
		if got := must(f.Sandbox, `stat -f -c %T /app "$HOME"; stat -c %u t/a; id -u; ls -A /tmp; hostname`); got != "overlayfs\noverlayfs\n"+strings.Fields(got)[2]+"\n"+strings.Fields(got)[2]+"\nsandbox\n" {
			t.Fatalf("fork %d: file systems of /app and HOME, owner of a file, own uid, its /tmp, hostname: %q; want overlays, the file its own, an empty /tmp", i, got)
		}
	}
	one, two := forks[0].Sandbox, forks[1].Sandbox
	must(one, `echo A >t/a && rm t/b && chmod 600 t/c && mv t/d t/z && echo mine >"$HOME/marker"`)
	changed := "a 644 A\nc 600 c\nz 644 d\nmine\n"
	if got := must(one, stateCmd); got != changed {
		t.Fatalf("the fork that changed its files: %q, want %q", got, changed)
	}
	for name, sb := range map[string]goruntime.Sandbox{"the other fork": two, "the original": orig} {
		if got := must(sb, stateCmd); got != want {
			t.Fatalf("%s after a fork changed its files: %q, want %q", name, got, want)
		}
	}
	must(orig, `echo later >t/a`)
	if got := must(two, stateCmd); got != want {
		t.Fatalf("a fork after the original changed a file: %q, want %q", got, want)
	}
	// The runtime server serves the layered /app.
	if data, err := one.ReadFile(ctx, "t/z"); err != nil || string(data) != "d\n" {
		t.Fatalf("read a snapshot's file through the fork's server: %q, %v", data, err)
	}
	if err := one.WriteFile(ctx, "up", bytes.NewReader([]byte("up\n"))); err != nil {
		t.Fatal(err)
	}
	if got := must(one, `cat up`); got != "up\n" {
		t.Fatalf("a file written through the fork's server, read by a command: %q", got)
	}
	if _, err := snapRun(ctx, two, `test -e up`); err == nil {
		t.Fatal("a file written through one fork's server shows in the other")
	}
	// The build cache: writable in every subdirectory, and warm.
	must(one, `for d in 00 7f ff; do touch "$HOME/.cache/go-build/$d/probe"; done`)
	if got := must(one, `sed -i s/one/two/ main.go && go build -o /tmp/p . && /tmp/p`); got != "two\n" {
		t.Fatalf("a fork's build of new code: %q", got)
	}
	// Nothing in a fork reaches the snapshot's tree.
	trees, _ := filepath.Glob(filepath.Join(b.StateDir(), "snapshots", "*", "*", "tree", "app", "t", "a"))
	if len(trees) == 0 {
		t.Fatal("no snapshot tree found under the state directory")
	}
	for _, p := range append(trees, b.StateDir()) {
		if out, err := snapRun(ctx, one, "ls "+p+" || cat "+p); err == nil {
			t.Fatalf("a fork lists or reads the host's %s: %q", p, out)
		}
	}
	if out, err := snapRun(ctx, one, `umount /app || umount -l /app || umount "$HOME"`); err == nil {
		t.Fatalf("a fork unmounted its layered /app or HOME: %q", out)
	}
	if got := must(one, `stat -f -c %T /app "$HOME"; cat t/z`); got != "overlayfs\noverlayfs\nd\n" {
		t.Fatalf("a fork's /app and HOME after it tried to unmount them: %q", got)
	}
	for _, tree := range trees {
		if data, err := os.ReadFile(tree); err != nil || string(data) != "a\n" {
			t.Fatalf("the snapshot's tree after its forks wrote: %s holds %q, %v", tree, data, err)
		}
	}
	// A pooled fork's files, snapshotted, reopened (from the pool),
	// forked and restored.
	waitPoolHolds(t, b, 1)
	snap, err := b.Snapshot(ctx, snapOwner, one, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		t.Fatalf("snapshot of a pooled fork: %v", err)
	}
	reopened, err := b.OpenSnapshot(ctx, snapOwner, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close(ctx)
	if !local.LayeredInPlace(reopened) {
		t.Fatal("OpenSnapshot with a sandbox ready in the pool: not a pool sandbox layered in place")
	}
	if got := must(reopened, stateCmd+`; cat /app/up; /tmp/p 2>/dev/null || echo no binary`); got != changed+"up\nno binary\n" {
		t.Fatalf("a sandbox opened from a pooled fork's snapshot: %q", got)
	}
	if err := b.Restore(ctx, snapOwner, two, snap.ID); err != nil {
		t.Fatalf("restore a pooled fork: %v", err)
	}
	if got := must(two, stateCmd); got != changed {
		t.Fatalf("a pooled fork restored to its sibling's snapshot: %q, want %q", got, changed)
	}
	// Closed, they leave nothing on the host: the mounts made in their
	// namespaces go with them, and their disks' loop devices.
	var recs []hostleaks.Sandbox
	for _, sb := range []goruntime.Sandbox{one, two, reopened, orig} {
		recs = append(recs, record(t, sb.(*local.Sandbox)))
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if leaks := leaksAfter(b.StateDir(), recs, false); len(leaks) > 0 {
		t.Fatalf("left on the host after the pooled forks closed:\n%s", strings.Join(leaks, "\n"))
	}
}
