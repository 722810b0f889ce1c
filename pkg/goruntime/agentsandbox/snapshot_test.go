package agentsandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// These tests run the backend's snapshots against a pool of fake pods
// (pods_test.go): each a real runtime server with its own files, so a
// snapshot taken in one pod and opened in another moves real files
// through real requests.

func run(t *testing.T, sb goruntime.Sandbox, command string) string {
	t.Helper()
	res, err := sb.Exec(t.Context(), goruntime.ExecRequest{Command: command})
	if err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d: %s%s", command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

func podOf(t *testing.T, p *podPool, sb goruntime.Sandbox) *pod {
	t.Helper()
	s, err := (&Backend{}).own(sb)
	if err != nil {
		t.Fatal(err)
	}
	return p.byIP(t, s.sb.PodIP())
}

// podRig is what a snapshot test starts from: a fake cluster with a warm
// pool of pods, a backend over them keeping its snapshots in a directory
// of its own (mod, if not nil, changes its Options), and a sandbox it
// opened.
type podRig struct {
	c    *cluster
	pool *podPool
	dir  string
	b    *Backend
	sb   goruntime.Sandbox
}

func newPodRig(t *testing.T, pods int, mod func(*Options)) *podRig {
	t.Helper()
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := &podRig{c: c, pool: newPodPool(t, c, pods), dir: t.TempDir()}
	r.b = newPodBackend(t, c, r.pool, r.dir, mod)
	sb, err := r.b.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.sb = sb
	return r
}

// snapshot takes alice's snapshot of the rig's sandbox, kept an hour.
func (r *podRig) snapshot(t *testing.T) goruntime.Snapshot {
	t.Helper()
	snap, err := r.b.Snapshot(t.Context(), "alice", r.sb, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// A snapshot taken through one backend opens in another pod through
// another backend sharing the directory (two replicas of a front end):
// /app, GOPATH and the build cache's new entries arrive, the seed stays
// the pod's own.
func TestSnapshotOpensThroughAnotherReplica(t *testing.T) {
	r := newPodRig(t, 2, nil)
	one, two, pool, sb := r.b, newPodBackend(t, r.c, r.pool, r.dir, nil), r.pool, r.sb
	ctx := t.Context()
	run(t, sb, `mkdir -p pkg "$GOPATH/bin" "$GOCACHE/ab" && echo 'package main' > main.go && echo lib > pkg/lib.go && chmod 755 pkg/lib.go &&
ln -s main.go link && echo tool > "$GOPATH/bin/tool" && echo built > "$GOCACHE/ab/entry-d"`)
	snap, err := one.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: time.Hour, Labels: map[string]string{"step": "built"}})
	if err != nil {
		t.Fatal(err)
	}
	if !goruntime.ValidHandleID(snap.ID) || snap.Method != snapshotMethod || snap.Bytes <= 0 || snap.Labels["step"] != "built" {
		t.Errorf("snapshot %+v", snap)
	}
	fork, err := two.OpenSnapshot(ctx, "alice", snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if podOf(t, pool, fork) == podOf(t, pool, sb) {
		t.Fatal("the snapshot opened in the pod it was taken in")
	}
	got := run(t, fork, `cat main.go pkg/lib.go "$GOPATH/bin/tool" "$GOCACHE/ab/entry-d"; stat -c %a pkg/lib.go; readlink link`)
	if want := "package main\nlib\ntool\nbuilt\n755\nmain.go\n"; got != want {
		t.Errorf("files in the fork: %q, want %q", got, want)
	}
	// The source pod's seed is not in the snapshot: the fork's is its own.
	if err := os.WriteFile(filepath.Join(podOf(t, pool, sb).gocache, "00", "seed-d"), []byte("changed under the snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(t, fork, `cat "$GOCACHE/00/seed-d"`); got != "seed" {
		t.Errorf("the fork's seed: %q", got)
	}
	list, err := two.ListSnapshots(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Errorf("alice's snapshots through the other replica: %+v, %v", list, err)
	}
	if err := two.DeleteSnapshot(ctx, "alice", snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := one.OpenSnapshot(ctx, "alice", snap.ID); !errors.Is(err, goruntime.ErrSnapshotNotFound) {
		t.Errorf("open after delete through the other replica: %v", err)
	}
}

// Another owner's snapshot ID answers exactly as a missing one, for every
// operation; their lists are their own.
func TestSnapshotOwnedLikeHandles(t *testing.T) {
	r := newPodRig(t, 2, nil)
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, "echo mine > f")
	snap := r.snapshot(t)
	missing := goruntime.NewHandleID()
	same := func(what string, foreign, absent error) {
		t.Helper()
		if !errors.Is(foreign, goruntime.ErrSnapshotNotFound) || strings.ReplaceAll(foreign.Error(), snap.ID, missing) != absent.Error() {
			t.Errorf("%s by bob: %v; on a missing ID: %v (want the same not found)", what, foreign, absent)
		}
	}
	_, e1 := b.OpenSnapshot(ctx, "bob", snap.ID)
	_, e2 := b.OpenSnapshot(ctx, "bob", missing)
	same("open", e1, e2)
	same("restore", b.Restore(ctx, "bob", sb, snap.ID), b.Restore(ctx, "bob", sb, missing))
	same("delete", b.DeleteSnapshot(ctx, "bob", snap.ID), b.DeleteSnapshot(ctx, "bob", missing))
	_, _, e1 = b.CreateHandle(ctx, "bob", goruntime.HandleSpec{TTL: time.Hour, FromSnapshot: snap.ID})
	_, _, e2 = b.CreateHandle(ctx, "bob", goruntime.HandleSpec{TTL: time.Hour, FromSnapshot: missing})
	same("create a handle from it", e1, e2)
	if l, err := b.ListSnapshots(ctx, "bob"); err != nil || len(l) != 0 {
		t.Errorf("bob lists %+v, %v", l, err)
	}
	if r.c.claimCount(t) != 1 {
		t.Errorf("%d claims: a refused open claimed a pod", r.c.claimCount(t))
	}
}

// Fork makes count sandboxes, each in a pod of its own with the files
// the sandbox had at the call (a write just before it included), isolated
// from each other and from the original; with a handle spec each is a
// handle of the owner.
func TestForkIsolatedHandles(t *testing.T) {
	r := newPodRig(t, 4, nil)
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, "echo v1 > shared && echo gone > deleted && echo x > renamed && echo y > moded")
	run(t, sb, "echo just-written > newest") // the write right before the fork
	res, err := b.Fork(ctx, "alice", sb, goruntime.ForkSpec{Count: 3, Handle: &goruntime.HandleSpec{TTL: time.Hour, Labels: map[string]string{"try": "fix"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("fork %d: %v", i, r.Err)
		}
		if !goruntime.ValidHandleID(r.Handle.ID) || r.Handle.Labels["try"] != "fix" {
			t.Errorf("fork %d handle %+v", i, r.Handle)
		}
		if got := run(t, r.Sandbox, "cat newest shared"); got != "just-written\nv1\n" {
			t.Errorf("fork %d: %q", i, got)
		}
	}
	run(t, res[0].Sandbox, "echo v2 > shared && rm deleted && mv renamed renamed2 && chmod 600 moded")
	for i, s := range []goruntime.Sandbox{sb, res[1].Sandbox, res[2].Sandbox} {
		if got := run(t, s, "cat shared deleted renamed; stat -c %a moded"); got != "v1\ngone\nx\n644\n" {
			t.Errorf("sandbox %d after fork 0's changes: %q", i, got)
		}
	}
	hs, err := b.ListHandles(ctx, "alice")
	if err != nil || len(hs) != 3 {
		t.Errorf("alice's handles: %d, %v", len(hs), err)
	}
}

// A fork whose pod never comes is reported alone; the others are made.
func TestForkPartialFailure(t *testing.T) {
	r := newPodRig(t, 3, func(o *Options) { o.ReadyTimeout = 2 * time.Second }) // the original and two forks
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, "echo a > f")
	res, err := b.Fork(ctx, "alice", sb, goruntime.ForkSpec{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ok, failed int
	for _, r := range res {
		switch {
		case r.Err == nil && r.Sandbox != nil:
			ok++
			if got := run(t, r.Sandbox, "cat f"); got != "a\n" {
				t.Errorf("fork: %q", got)
			}
		case r.Err != nil && strings.Contains(r.Err.Error(), "fork ") && strings.Contains(r.Err.Error(), " of 3 from "+sb.ID()):
			failed++
		default:
			t.Errorf("result %+v", r)
		}
	}
	if ok != 2 || failed != 1 {
		t.Errorf("%d forks made, %d failed; want 2 and 1", ok, failed)
	}
}

// Restore rolls the sandbox back in place: changed, deleted and added
// files as they were; the build cache keeps what it gained.
func TestRestoreInPlace(t *testing.T) {
	r := newPodRig(t, 1, nil)
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, `echo v1 > main.go && mkdir -p d && echo keep > d/keep`)
	snap := r.snapshot(t)
	run(t, sb, `echo v2 > main.go && rm -r d && echo new > added && mkdir -p "$GOCACHE/cd" && echo later > "$GOCACHE/cd/later-d"`)
	if err := b.Restore(ctx, "alice", sb, snap.ID); err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb, `cat main.go d/keep "$GOCACHE/cd/later-d"; ls`); got != "v1\nkeep\nlater\nd\nmain.go\n" {
		t.Errorf("after the restore: %q", got)
	}
	if got := sb.ID(); got == "" {
		t.Error("no ID")
	}
}

// Nothing is taken while a command runs: the snapshot and the fork are
// refused with ErrSandboxBusy and no fork is claimed.
func TestSnapshotRefusedWhileACommandRuns(t *testing.T) {
	r := newPodRig(t, 2, nil)
	b, sb, ctx := r.b, r.sb, t.Context()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(context.WithoutCancel(ctx), goruntime.ExecRequest{Command: "touch started; sleep 6"})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(podOf(t, r.pool, sb).app, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: time.Hour}); !errors.Is(err, goruntime.ErrSandboxBusy) {
		t.Errorf("snapshot during a command: %v", err)
	}
	if _, err := b.Fork(ctx, "alice", sb, goruntime.ForkSpec{Count: 1}); !errors.Is(err, goruntime.ErrSandboxBusy) {
		t.Errorf("fork during a command: %v", err)
	}
	if n := r.c.claimCount(t); n != 1 {
		t.Errorf("%d claims after a refused fork, want the original's alone", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: time.Hour}); err != nil {
		t.Errorf("snapshot once the command ended: %v", err)
	}
}

// Past the quota a snapshot fails with ErrSnapshotQuota; one past its
// TTL is gone; a backend with no snapshot directory says what to set.
func TestSnapshotQuotaTTLAndNoStore(t *testing.T) {
	r := newPodRig(t, 1, func(o *Options) { o.SnapshotBytes = 64 << 10 })
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, "echo small > f")
	snap, err := b.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: goruntime.MinHandleTTL})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "head -c 100000 /dev/zero > big")
	if _, err := b.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: time.Hour}); !errors.Is(err, goruntime.ErrSnapshotQuota) || !strings.Contains(err.Error(), "SnapshotBytes") {
		t.Errorf("snapshot over the quota: %v", err)
	}
	time.Sleep(goruntime.MinHandleTTL + 100*time.Millisecond)
	if _, err := b.OpenSnapshot(ctx, "alice", snap.ID); !errors.Is(err, goruntime.ErrSnapshotNotFound) {
		t.Errorf("open past the TTL: %v", err)
	}
	if l, _ := b.ListSnapshots(ctx, "alice"); len(l) != 0 {
		t.Errorf("listed past the TTL: %+v", l)
	}

	none := newPodBackend(t, r.c, r.pool, "", nil)
	if _, err := none.Snapshot(ctx, "alice", sb, goruntime.SnapshotSpec{TTL: time.Hour}); err == nil || !strings.Contains(err.Error(), "Options.SnapshotDir") {
		t.Errorf("snapshot without a directory: %v", err)
	}
}

// A handle created from a snapshot starts with its files, in one pod
// claimed for it; a put that fails deletes the claim.
func TestHandleFromSnapshot(t *testing.T) {
	r := newPodRig(t, 2, nil)
	b, sb, ctx := r.b, r.sb, t.Context()
	run(t, sb, "echo base > base.txt")
	snap := r.snapshot(t)
	h, hs, err := b.CreateHandle(ctx, "alice", goruntime.HandleSpec{TTL: time.Hour, FromSnapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, hs, "cat base.txt"); got != "base\n" {
		t.Errorf("handle %s from the snapshot: %q", h.ID, got)
	}
}
