package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestPoolForkKeepsNothingOfTheHost: a pooled fork (snappool.go) of a
// sandbox that made set-id files gets none (the tree is sealed), keeps
// its hard links and fifos; what it writes in its build cache's
// subdirectories (shown from the shared StateDir/cachedirs layer) stays
// on its own disk; and the fork's hidden snapshot, whose ID is on the
// host, is neither opened, restored nor deleted by ID, not even by its
// owner.
func TestPoolForkKeepsNothingOfTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layered snapshots need root")
	}
	ctx, b, orig := newLayeredRig(t, 1)
	if out, err := snapRun(ctx, orig, `mkdir d && chmod 2755 d && echo s >u && chmod 6755 u && ln u h && mkfifo f`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	waitPoolHolds(t, b, 1)
	forks, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if forks[0].Err != nil {
		t.Fatal(forks[0].Err)
	}
	fork := forks[0].Sandbox
	defer fork.Close(ctx)
	if !local.LayeredInPlace(fork) {
		t.Fatal("a fork with a sandbox ready in the pool: not layered in place")
	}
	out, err := snapRun(ctx, fork, `stat -c '%n %a %h' d u h; [ u -ef h ] && echo linked; [ -p f ] && echo fifo; touch "$HOME"/.cache/go-build/00/probe "$HOME"/.cache/go-build/ff/probe`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "d 755 2\nu 755 2\nh 755 2\nlinked\nfifo\n"; out != want {
		t.Fatalf("a fork's files: %q, want %q (no set-id bit, the hard link and fifo kept)", out, want)
	}
	if got, _ := filepath.Glob(filepath.Join(b.StateDir(), "cachedirs", "*", "*")); len(got) != 0 {
		t.Fatalf("a fork's cache writes reached the shared layer: %v", got)
	}
	trees, _ := filepath.Glob(filepath.Join(b.StateDir(), "snapshots", "*", "*", "tree"))
	if len(trees) != 1 {
		t.Fatalf("want the fork's one hidden snapshot, found %v", trees)
	}
	id := filepath.Base(filepath.Dir(trees[0]))
	if sb, err := b.OpenSnapshot(ctx, snapOwner, id); err == nil {
		sb.Close(ctx)
		t.Fatal("the fork's hidden snapshot opened by ID")
	}
	if err := b.Restore(ctx, snapOwner, orig, id); err == nil {
		t.Fatal("a sandbox restored from the fork's hidden snapshot by ID")
	}
	if err := b.DeleteSnapshot(ctx, snapOwner, id); err == nil {
		t.Fatal("the fork's hidden snapshot deleted by ID")
	}
	if l, err := b.ListSnapshots(ctx, snapOwner); err != nil || len(l) != 0 {
		t.Fatalf("the owner's snapshots with a fork live: %+v, %v; want none listed", l, err)
	}
	if out, err := snapRun(ctx, fork, `cat u`); err != nil || out != "s\n" {
		t.Fatalf("the fork after the calls on its hidden snapshot: %q, %v", out, err)
	}
}
