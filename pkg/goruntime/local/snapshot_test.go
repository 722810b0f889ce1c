package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The snapshot tests run the same checks as root (here) and as a user
// (TestSnapshotsAsUser, in a helper process): checkSnapshots returns the
// first thing that did not hold.

func TestSnapshots(t *testing.T) {
	opts := testOptions()
	opts.StateDir = t.TempDir()
	shareSeed(t, filepath.Join(opts.StateDir, "seed"))
	if err := checkSnapshots(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
}

const snapshotsUID = 65519

func TestSnapshotsAsUser(t *testing.T) {
	u := newAsUser(t, snapshotsUID, "grs-snapshots", rootlessSubIDs+10*65536, true)
	out, err := u.command("snapshots", true).CombinedOutput()
	if err != nil {
		t.Fatalf("snapshot checks as uid %d: %v\n%s", snapshotsUID, err, out)
	}
}

func snapshotsHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	if err := checkSnapshots(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

const snapOwner, otherOwner = "alice", "mallory"

func snapRun(ctx context.Context, sb goruntime.Sandbox, cmd string) (string, error) {
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: cmd, Timeout: 5 * time.Minute})
	if err != nil {
		return "", fmt.Errorf("%s in %s: %w", cmd, sb.ID(), err)
	}
	if res.ExitCode != 0 {
		return res.Stdout, fmt.Errorf("%s in %s: exit %d: %s%s", cmd, sb.ID(), res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout, nil
}

// state is what a sandbox's files look like to the checks: one line per
// file of /app/t (name, mode, content), and the marker in HOME.
const stateCmd = `cd /app/t && for f in *; do printf '%s %s %s\n' "$f" "$(stat -c %a "$f")" "$(cat "$f")"; done; cat "$HOME/marker"`

func checkSnapshots(ctx context.Context, opts local.Options) error {
	if err := checkForks(ctx, opts); err != nil {
		return err
	}
	// Once the sandboxes above are closed: a user's budget counts them.
	return checkForkPartial(ctx, opts)
}

func checkForks(ctx context.Context, opts local.Options) error {
	b, err := local.New(opts)
	if err != nil {
		return err
	}
	defer b.Close(ctx)
	orig, err := b.Open(ctx)
	if err != nil {
		return err
	}
	defer orig.Close(ctx)
	if _, err := snapRun(ctx, orig, `mkdir -p t && cd t && echo a >a && echo b >b && echo c >c && echo d >d && chmod 644 c && echo home >"$HOME/marker"`); err != nil {
		return err
	}
	want, err := snapRun(ctx, orig, stateCmd)
	if err != nil {
		return err
	}
	// A warm build and test cache: a fork's `go test` is a cache hit.
	if _, err := snapRun(ctx, orig, `mkdir -p m && cd m && printf 'module m\n\ngo 1.21\n' >go.mod && printf 'package m\n\nimport "testing"\n\nfunc TestM(t *testing.T) {}\n' >m_test.go && go test ./...`); err != nil {
		return err
	}
	// Written just before the fork: every fork has it.
	if _, err := snapRun(ctx, orig, `echo fresh >t/e`); err != nil {
		return err
	}
	want = strings.Replace(want, "home\n", "e 644 fresh\nhome\n", 1)
	forks, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 3})
	if err != nil {
		return fmt.Errorf("fork: %v", err)
	}
	if len(forks) != 3 {
		return fmt.Errorf("fork: %d results, want 3", len(forks))
	}
	var sbs []goruntime.Sandbox
	for i, f := range forks {
		if f.Err != nil {
			return fmt.Errorf("fork %d: %v", i, f.Err)
		}
		defer f.Sandbox.Close(ctx)
		sbs = append(sbs, f.Sandbox)
		if f.Sandbox.ID() == orig.ID() {
			return fmt.Errorf("fork %d has the original's ID %s", i, orig.ID())
		}
	}
	if out, err := snapRun(ctx, sbs[0], `cd m && go test ./...`); err != nil || !strings.Contains(out, "(cached)") {
		return fmt.Errorf("go test in a fork of a sandbox that ran it: %q, %v; want a cached result", out, err)
	}
	// One change in each: a write, a delete, a chmod; a rename in the
	// original.
	changes := []struct {
		sb  goruntime.Sandbox
		cmd string
		old string
		new string
	}{
		{sbs[0], `echo A >t/a`, "a 644 a\n", "a 644 A\n"},
		{sbs[1], `rm t/b`, "b 644 b\n", ""},
		{sbs[2], `chmod 600 t/c`, "c 644 c\n", "c 600 c\n"},
		{orig, `mv t/d t/z`, "d 644 d\n", ""},
	}
	for _, c := range changes {
		if _, err := snapRun(ctx, c.sb, c.cmd); err != nil {
			return err
		}
	}
	for i, c := range changes {
		got, err := snapRun(ctx, c.sb, stateCmd)
		if err != nil {
			return err
		}
		w := strings.Replace(want, c.old, c.new, 1)
		if i == 3 {
			w = strings.Replace(w, "e 644 fresh\n", "e 644 fresh\nz 644 d\n", 1)
		}
		if got != w {
			return fmt.Errorf("sandbox %d (%s) after its own change %q:\n%s\nwant\n%s", i, c.sb.ID(), c.cmd, got, w)
		}
	}
	if err := checkSnapshotRestore(ctx, b, opts, orig); err != nil {
		return err
	}
	if err := checkSnapshotConfined(ctx, b, orig); err != nil {
		return err
	}
	if err := checkSnapshotBusy(ctx, b, orig); err != nil {
		return err
	}
	if err := checkSnapshotOwnership(ctx, b, orig); err != nil {
		return err
	}
	return checkSnapshotQuotaTTL(ctx, opts, orig)
}

// checkSnapshotRestore: a snapshot survives a new backend on the same
// state directory, opens into a sandbox of its own, and rolls a sandbox
// back in place.
func checkSnapshotRestore(ctx context.Context, b *local.Backend, opts local.Options, orig goruntime.Sandbox) error {
	snap, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		return fmt.Errorf("snapshot: %v", err)
	}
	before, err := snapRun(ctx, orig, stateCmd)
	if err != nil {
		return err
	}
	b2, err := local.New(opts)
	if err != nil {
		return err
	}
	defer b2.Close(ctx)
	list, err := b2.ListSnapshots(ctx, snapOwner)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID || list[0].Bytes <= 0 {
		return fmt.Errorf("list after restart: %+v, %v; want the one snapshot %s", list, err, snap.ID)
	}
	sb, err := b2.OpenSnapshot(ctx, snapOwner, snap.ID)
	if err != nil {
		return fmt.Errorf("open snapshot after restart: %v", err)
	}
	defer sb.Close(ctx)
	if got, err := snapRun(ctx, sb, stateCmd); err != nil || got != before {
		return fmt.Errorf("sandbox from snapshot: %q, %v; want %q", got, err, before)
	}
	if _, err := snapRun(ctx, orig, `echo later >t/a && rm t/b && mkdir t/dir && echo x >"$HOME/extra"`); err != nil {
		return err
	}
	if err := b2.Restore(ctx, snapOwner, orig, snap.ID); err != nil {
		return fmt.Errorf("restore: %v", err)
	}
	if got, err := snapRun(ctx, orig, stateCmd+`; ls "$HOME"`); err != nil || !strings.HasPrefix(got, before) || strings.Contains(got, "extra") {
		return fmt.Errorf("after restore: %q, %v; want %q and no $HOME/extra", got, err, before)
	}
	return nil
}

// checkSnapshotConfined: the copy runs as the sandbox does, so a symlink
// the sandbox planted where a restore writes leads into the sandbox's
// own tree, never the host's: a cache directory replaced by a link to
// /tmp gets the entry in the sandbox's /tmp, and the host's /tmp stays
// as it was.
func checkSnapshotConfined(ctx context.Context, b *local.Backend, orig goruntime.Sandbox) error {
	snap, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		return err
	}
	defer b.DeleteSnapshot(ctx, snapOwner, snap.ID)
	// A directory of the cache holding an entry of the sandbox's own and
	// no subdirectory: an executable the seed cached (<hash>-d/<name>,
	// read-only and not the sandbox's) cannot be removed to plant a link.
	entry, err := snapRun(ctx, orig, `cd "$(go env GOCACHE)" && for d in ??; do
		[ -z "$(find "$d" -mindepth 1 -type d -print -quit)" ] || continue
		f=$(find "$d" -type f -user "$(id -u)" -print -quit)
		[ -n "$f" ] && { echo "$f"; break; }
	done`)
	if err != nil {
		return err
	}
	dir, name, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(entry), "./"), "/")
	if !ok || name == "" {
		return fmt.Errorf("no cache entry of the sandbox's own: %q", entry)
	}
	if out, err := snapRun(ctx, orig, fmt.Sprintf(`cd "$(go env GOCACHE)" && { rm -rf %s 2>&1 || exit 0; } && ln -s /tmp %s && echo planted`, dir, dir)); err != nil {
		return err
	} else if !strings.Contains(out, "planted") {
		// A memory disk's overlay, in a user namespace, cannot hide a
		// seed directory (no whiteouts there: EIO): nothing to plant.
		if !strings.Contains(out, "Input/output error") || os.Geteuid() == 0 {
			return fmt.Errorf("replace the cache directory %s: %s", dir, out)
		}
		return nil
	}
	if err := b.Restore(ctx, snapOwner, orig, snap.ID); err != nil {
		return fmt.Errorf("restore over a planted link: %v", err)
	}
	if _, err := os.Lstat("/tmp/" + name); err == nil {
		os.Remove("/tmp/" + name)
		return fmt.Errorf("a restore wrote the cache entry %s into the host's /tmp through the sandbox's link", name)
	}
	if _, err := snapRun(ctx, orig, fmt.Sprintf(`test -f /tmp/%s && cd "$(go env GOCACHE)" && rm %s && mkdir %s`, name, dir, dir)); err != nil {
		return fmt.Errorf("the entry is not in the sandbox's own /tmp: %v", err)
	}
	return nil
}

// checkSnapshotBusy: a snapshot, a fork and a restore are refused while
// a command runs, or a process it left behind.
func checkSnapshotBusy(ctx context.Context, b *local.Backend, orig goruntime.Sandbox) error {
	done := make(chan error, 1)
	go func() {
		_, err := snapRun(ctx, orig, `sleep 3`)
		done <- err
	}()
	time.Sleep(time.Second)
	_, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if !errors.Is(err, goruntime.ErrSandboxBusy) {
		return fmt.Errorf("snapshot while a command runs: %v, want ErrSandboxBusy", err)
	}
	if _, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 1}); !errors.Is(err, goruntime.ErrSandboxBusy) {
		return fmt.Errorf("fork while a command runs: %v, want ErrSandboxBusy", err)
	}
	if err := <-done; err != nil {
		return err
	}
	if _, err := snapRun(ctx, orig, `setsid sleep 30 >/dev/null 2>&1 </dev/null &`); err != nil {
		return err
	}
	if _, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour}); !errors.Is(err, goruntime.ErrSandboxBusy) {
		return fmt.Errorf("snapshot while a left-behind process runs: %v, want ErrSandboxBusy", err)
	}
	if _, err := snapRun(ctx, orig, `pkill -x sleep; while pgrep -x sleep >/dev/null; do sleep 0.1; done`); err != nil {
		return err
	}
	if _, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour}); err != nil {
		return fmt.Errorf("snapshot once nothing runs: %v", err)
	}
	return nil
}

// checkSnapshotOwnership: another owner's snapshot looks exactly like a
// missing one, for every operation.
func checkSnapshotOwnership(ctx context.Context, b *local.Backend, orig goruntime.Sandbox) error {
	snap, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		return err
	}
	missing := goruntime.NewHandleID()
	for _, id := range []string{snap.ID, missing} {
		errs := map[string]error{}
		_, errs["open"] = b.OpenSnapshot(ctx, otherOwner, id)
		errs["restore"] = b.Restore(ctx, otherOwner, orig, id)
		errs["delete"] = b.DeleteSnapshot(ctx, otherOwner, id)
		_, _, errs["create handle"] = b.CreateHandle(ctx, otherOwner, goruntime.HandleSpec{TTL: time.Minute, FromSnapshot: id})
		for op, err := range errs {
			if !errors.Is(err, goruntime.ErrSnapshotNotFound) {
				return fmt.Errorf("%s of %s by another owner: %v, want ErrSnapshotNotFound", op, id, err)
			}
			if strings.Contains(err.Error(), snapOwner) || strings.Contains(err.Error(), orig.ID()) {
				return fmt.Errorf("%s of %s by another owner names more than the ID: %v", op, id, err)
			}
		}
	}
	// The two errors read the same but for the ID.
	_, e1 := b.OpenSnapshot(ctx, otherOwner, snap.ID)
	_, e2 := b.OpenSnapshot(ctx, otherOwner, missing)
	if strings.ReplaceAll(e1.Error(), snap.ID, "ID") != strings.ReplaceAll(e2.Error(), missing, "ID") {
		return fmt.Errorf("a foreign snapshot's error %q differs from a missing one's %q", e1, e2)
	}
	if list, err := b.ListSnapshots(ctx, otherOwner); err != nil || len(list) != 0 {
		return fmt.Errorf("another owner lists %+v, %v; want none", list, err)
	}
	// The owner's own handle from it works.
	h, sb, err := b.CreateHandle(ctx, snapOwner, goruntime.HandleSpec{TTL: time.Minute, FromSnapshot: snap.ID})
	if err != nil {
		return fmt.Errorf("create handle from snapshot: %v", err)
	}
	defer b.DeleteHandle(ctx, snapOwner, h.ID)
	defer sb.Close(ctx)
	if got, err := snapRun(ctx, sb, `cat t/e`); err != nil || got != "fresh\n" {
		return fmt.Errorf("handle from snapshot: %q, %v", got, err)
	}
	if err := b.DeleteSnapshot(ctx, snapOwner, snap.ID); err != nil {
		return err
	}
	if _, err := b.OpenSnapshot(ctx, snapOwner, snap.ID); !errors.Is(err, goruntime.ErrSnapshotNotFound) {
		return fmt.Errorf("open after delete: %v, want ErrSnapshotNotFound", err)
	}
	return nil
}

// checkSnapshotQuotaTTL: past the quota a snapshot fails with
// ErrSnapshotQuota; past its TTL it is gone.
func checkSnapshotQuotaTTL(ctx context.Context, opts local.Options, orig goruntime.Sandbox) error {
	opts.SnapshotBytes, opts.SnapshotBytesPerOwner = 4<<20, 4<<20
	b, err := local.New(opts)
	if err != nil {
		return err
	}
	defer b.Close(ctx)
	for _, s := range mustList(ctx, b) {
		_ = b.DeleteSnapshot(ctx, snapOwner, s.ID)
	}
	short, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Second})
	if err != nil {
		return fmt.Errorf("snapshot within the quota: %v", err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := b.OpenSnapshot(ctx, snapOwner, short.ID); !errors.Is(err, goruntime.ErrSnapshotNotFound) {
		return fmt.Errorf("open past the TTL: %v, want ErrSnapshotNotFound", err)
	}
	if list := mustList(ctx, b); len(list) != 0 {
		return fmt.Errorf("list past the TTL: %+v", list)
	}
	if _, err := snapRun(ctx, orig, `head -c 3000000 /dev/urandom >t/big`); err != nil {
		return err
	}
	if _, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour}); err != nil {
		return fmt.Errorf("first snapshot of 3 MB under a 4 MiB quota: %v", err)
	}
	_, err = b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
	if !errors.Is(err, goruntime.ErrSnapshotQuota) || !strings.Contains(err.Error(), "SnapshotBytes") {
		return fmt.Errorf("second snapshot past the quota: %v, want ErrSnapshotQuota naming Options.SnapshotBytes", err)
	}
	if _, err := snapRun(ctx, orig, `head -c 5000000 /dev/urandom >t/big`); err != nil {
		return err
	}
	if _, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 1}); !errors.Is(err, goruntime.ErrSnapshotQuota) {
		return fmt.Errorf("fork of a sandbox whose files are over the quota: %v, want ErrSnapshotQuota", err)
	}
	_, err = snapRun(ctx, orig, `rm t/big`)
	return err
}

func mustList(ctx context.Context, b *local.Backend) []goruntime.Snapshot {
	list, _ := b.ListSnapshots(ctx, snapOwner)
	return list
}

// checkForkPartial: a fork past what the host lets this backend open
// fails alone, and says why, while the others are made.
func checkForkPartial(ctx context.Context, opts local.Options) error {
	if os.Geteuid() == 0 {
		// Host uids of a range of this test's own: the original and one
		// fork.
		opts.HostUIDBase, opts.HostUIDCount = 1_960_419_000, 2
	} else {
		// Room for the original and one fork in the user's budget.
		opts = smallDisk(opts)
		opts.MemoryBytes = 96 << 20
		opts.MemoryBudgetBytes = 2 * (96<<20 + 64<<20)
	}
	b, err := local.New(opts)
	if err != nil {
		return err
	}
	defer b.Close(ctx)
	orig, err := b.Open(ctx)
	if err != nil {
		return err
	}
	defer orig.Close(ctx)
	if _, err := snapRun(ctx, orig, `echo one >f`); err != nil {
		return err
	}
	forks, err := b.Fork(ctx, snapOwner, orig, goruntime.ForkSpec{Count: 3})
	if err != nil {
		return fmt.Errorf("fork with room for one: %v", err)
	}
	ok, failed := 0, 0
	for i, f := range forks {
		if f.Err != nil {
			failed++
			if !errors.Is(f.Err, goruntime.ErrUnavailable) || !strings.Contains(f.Err.Error(), fmt.Sprintf("fork %d of 3", i+1)) {
				return fmt.Errorf("fork %d failed with %v, want an error naming it and wrapping ErrUnavailable", i, f.Err)
			}
			continue
		}
		ok++
		defer f.Sandbox.Close(ctx)
		if got, err := snapRun(ctx, f.Sandbox, `cat f`); err != nil || got != "one\n" {
			return fmt.Errorf("fork %d: %q, %v", i, got, err)
		}
	}
	if ok != 1 || failed != 2 {
		return fmt.Errorf("forks with room for one: %d made, %d failed; want 1 and 2", ok, failed)
	}
	return nil
}
