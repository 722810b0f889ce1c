package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The snapshots section (issue 42): the local backend's snapshots and
// forks of a sandbox that has built smallModule, as this process's user:
// snapshot, fork, a 10-way fork and rollback against their targets; a
// fork's first go build against a warm rebuild in the original, side by
// side round by round, also from a snapshot whose build cache is 2 h
// old; and what 10 forks hold on disk against one sandbox.

// snapshotOwner owns the section's snapshots.
const snapshotOwner = "bench"

// snapshotsSection measures the snapshots section: as root, in the two
// sides of the rootless section (rootless.go), root's first and then the
// user's, each row once per side; otherwise in this process, as its user.
func (r *runner) snapshotsSection(ctx context.Context) error {
	if os.Geteuid() != 0 {
		b, err := r.newLocal(ctx, snapshotOptions(local.Options{}))
		if err != nil {
			return err
		}
		defer b.Close(context.WithoutCancel(ctx))
		return r.snapshotFigures(ctx, b)
	}
	return r.withSides(ctx, SectionSnapshots, nil, func(root, rootless *sideProc) error {
		for _, p := range []struct {
			side *sideProc
			name string
		}{{root, "root"}, {rootless, fmt.Sprintf("uid %d", r.cfg.RootlessUID)}} {
			r.logf("snapshots: as %s, %d rounds", p.name, r.cfg.Rounds)
			rep, err := p.side.call(sideRequest{Op: opSnapshots, Rounds: r.cfg.Rounds})
			if err != nil {
				return fmt.Errorf("as %s: %w", p.name, err)
			}
			for _, row := range rep.Rows {
				row.Figure = p.name + ": " + row.Figure
				r.add(row)
			}
		}
		return nil
	})
}

// snapshotOptions are the options of the section's backends: sandboxes
// of 256 MiB of memory and a 256 MiB disk (65536 inodes), so that a user's memory budget
// (half the host's memory by default) holds the original, 10 forks and
// the warm pool at once.
func snapshotOptions(o local.Options) local.Options {
	o.MemoryBytes, o.DiskBytes, o.DiskInodes = 256<<20, 256<<20, 65536
	return o
}

// snapshots measures the snapshots section's figures in the side, with a
// backend of its own (snapshotOptions).
func (s *side) snapshots(ctx context.Context, rounds int) ([]Row, error) {
	if s.pooled == nil {
		return nil, errors.New("snapshots before setup")
	}
	r := &runner{cfg: Config{Rounds: rounds, StateDir: s.opts.StateDir, Log: s.log}, report: &Report{}, bins: map[string]string{"sandbox-server": s.opts.ServerPath}}
	b, err := r.newLocal(ctx, snapshotOptions(s.opts))
	if err != nil {
		return nil, err
	}
	defer b.Close(context.WithoutCancel(ctx))
	err = r.snapshotFigures(ctx, b)
	return r.report.Rows, err
}

// snapshotFigures measures the figures with b.
func (r *runner) snapshotFigures(ctx context.Context, b *local.Backend) error {
	orig, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		return err
	}
	defer orig.Close(context.WithoutCancel(ctx))
	if _, err := execOK(ctx, orig, goruntime.Request{Files: files(smallModule(0)), Command: "go build -o app . && go test ./..."}); err != nil {
		return err
	}
	sb := orig.Sandbox()
	rounds := r.cfg.Rounds
	var snap, fork, restore durations
	var last goruntime.Snapshot
	for range rounds {
		start := time.Now()
		s, err := b.Snapshot(ctx, snapshotOwner, sb, goruntime.SnapshotSpec{TTL: time.Hour})
		if err != nil {
			return err
		}
		snap = append(snap, time.Since(start))
		start = time.Now()
		if err := b.Restore(ctx, snapshotOwner, sb, s.ID); err != nil {
			return err
		}
		restore = append(restore, time.Since(start))
		start = time.Now()
		fs, err := b.Fork(ctx, snapshotOwner, sb, goruntime.ForkSpec{Count: 1})
		if err := forkErr(fs, err); err != nil {
			return err
		}
		fork = append(fork, time.Since(start))
		closeForks(ctx, fs)
		if last.ID != "" {
			_ = b.DeleteSnapshot(ctx, snapshotOwner, last.ID)
		}
		last = s
	}
	r.add(Row{Section: "snapshots", Figure: fmt.Sprintf("snapshot of a built module (%d bytes, method %s), p50", last.Bytes, last.Method),
		Ours: ms(snap.p50()), Baseline: "target 100 ms", Ratio: ratio(snap.p50(), 100*time.Millisecond), Target: "<= 1"})
	r.add(Row{Section: "snapshots", Figure: "fork (1 sandbox), p50", Ours: ms(fork.p50()), Baseline: "target 50 ms",
		Ratio: ratio(fork.p50(), 50*time.Millisecond), Target: "<= 1"})
	r.add(Row{Section: "snapshots", Figure: "rollback in place, p50", Ours: ms(restore.p50()), Baseline: "target 100 ms",
		Ratio: ratio(restore.p50(), 100*time.Millisecond), Target: "<= 1"})

	var ten durations
	for range max(rounds/3, 1) {
		start := time.Now()
		fs, err := b.Fork(ctx, snapshotOwner, sb, goruntime.ForkSpec{Count: 10})
		if err := forkErr(fs, err); err != nil {
			return err
		}
		ten = append(ten, time.Since(start))
		closeForks(ctx, fs)
	}
	r.add(Row{Section: "snapshots", Figure: "10-way fork in one call, p50", Ours: ms(ten.p50()), Baseline: "target 300 ms",
		Ratio: ratio(ten.p50(), 300*time.Millisecond), Target: "<= 1"})

	if err := r.forkBuildFigure(ctx, b, orig, "", "fork's first go build (new code)"); err != nil {
		return err
	}
	// Go refreshes a cache file's mtime on use when it is over an hour
	// old: age the sandbox's own cache files (not the seed's) by 2 h.
	age := `find "$(go env GOCACHE)" -type f -user "$(id -u)" -exec touch -d '2 hours ago' {} +`
	if err := r.forkBuildFigure(ctx, b, orig, age, "fork's first go build, cache 2 h old"); err != nil {
		return err
	}
	if last.ID != "" {
		_ = b.DeleteSnapshot(ctx, snapshotOwner, last.ID)
	}
	return r.forkDiskFigure(ctx, b, orig)
}

// forkBuildFigure times, round by round, a go build of new code in a
// fresh fork of orig and the same in orig, after prep ran in orig.
func (r *runner) forkBuildFigure(ctx context.Context, b *local.Backend, orig *goruntime.Session, prep, figure string) error {
	round := 1000
	var forked, warm durations
	for range r.cfg.Rounds {
		round++
		if _, err := execOK(ctx, orig, goruntime.Request{Files: files(smallModule(round)), Command: "go build -o app . && " + orNothing(prep)}); err != nil {
			return err
		}
		fs, err := b.Fork(ctx, snapshotOwner, orig.Sandbox(), goruntime.ForkSpec{Count: 1})
		if err := forkErr(fs, err); err != nil {
			return err
		}
		round++
		fsess := goruntime.NewSession(fs[0].Sandbox, goruntime.Options{})
		d, err := execOK(ctx, fsess, goruntime.Request{Files: files(smallModule(round)), Command: "go build -o app ."})
		closeForks(ctx, fs)
		if err != nil {
			return err
		}
		forked = append(forked, d)
		if d, err = execOK(ctx, orig, goruntime.Request{Files: files(smallModule(round)), Command: "go build -o app ."}); err != nil {
			return err
		}
		warm = append(warm, d)
	}
	r.add(Row{Section: "snapshots", Figure: figure + ", p50", Ours: ms(forked.p50()), Baseline: "warm rebuild in the original: " + ms(warm.p50()),
		Ratio: ratio(forked.p50(), warm.p50()), Target: "<= 1.2"})
	return nil
}

func orNothing(cmd string) string {
	if cmd == "" {
		return "true"
	}
	return cmd
}

// forkDiskFigure compares what 10 forks of orig hold (a fork writes
// nothing of its own here) with what orig holds: the forks' own disks
// (or memory disks), and what the snapshot store grew by while they
// live (a layered fork's shared snapshot, counted once).
func (r *runner) forkDiskFigure(ctx context.Context, b *local.Backend, orig *goruntime.Session) error {
	one, err := diskUsed(ctx, orig.Sandbox())
	if err != nil {
		return err
	}
	// Listing prunes: the trees of earlier forks, all closed, go first.
	if _, err := b.ListSnapshots(ctx, snapshotOwner); err != nil {
		return err
	}
	store := filepath.Join(b.StateDir(), "snapshots")
	before, err := treeBytes(store)
	if err != nil {
		return err
	}
	fs, err := b.Fork(ctx, snapshotOwner, orig.Sandbox(), goruntime.ForkSpec{Count: 10})
	if err := forkErr(fs, err); err != nil {
		return err
	}
	defer closeForks(ctx, fs)
	var sum int64
	for _, f := range fs {
		n, err := diskUsed(ctx, f.Sandbox)
		if err != nil {
			return err
		}
		sum += n
	}
	after, err := treeBytes(store)
	if err != nil {
		return err
	}
	shared := max(after-before, 0)
	empty, err := emptyDiskUsed(ctx, b)
	if err != nil {
		return err
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	r.add(Row{Section: "snapshots", Figure: "disk of 10 forks (no writes of their own; what they share counted once)",
		Ours:     fmt.Sprintf("%.2f MiB (%.2f shared)", mib(sum+shared), mib(shared)),
		Baseline: fmt.Sprintf("one sandbox: %.2f MiB", mib(one)), Ratio: float64(sum+shared) / float64(one)})
	// Each sandbox's file system holds its own directories from birth
	// (the disk's root and lost+found, the upper and work directories of
	// /app's and the caches' layers): a fork's own writes, counted as a
	// new sandbox's.
	r.add(Row{Section: "snapshots", Figure: "disk of 10 forks less what 10 new sandboxes hold empty",
		Ours:     fmt.Sprintf("%.2f MiB (a new sandbox holds %.2f MiB)", mib(sum+shared-10*empty), mib(empty)),
		Baseline: fmt.Sprintf("one sandbox: %.2f MiB", mib(one)), Ratio: float64(sum+shared-10*empty) / float64(one), Target: "<= 1.5"})
	return nil
}

// emptyDiskUsed is what the disk of a sandbox b opens holds before
// anything runs in it.
func emptyDiskUsed(ctx context.Context, b *local.Backend) (int64, error) {
	sb, err := b.Open(ctx)
	if err != nil {
		return 0, err
	}
	defer sb.Close(context.WithoutCancel(ctx))
	return diskUsed(ctx, sb)
}

// treeBytes is the disk the files under dir take (allocated blocks).
func treeBytes(dir string) (int64, error) {
	var sum int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			sum += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("snapshot store size: %w", err)
	}
	return sum, nil
}

// diskUsed is what sb's disk holds, in bytes, as its file system counts.
func diskUsed(ctx context.Context, sb goruntime.Sandbox) (int64, error) {
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "stat -f -c '%b %f %S' /app", Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	f := strings.Fields(res.Stdout)
	if res.ExitCode != 0 || len(f) != 3 {
		return 0, fmt.Errorf("disk usage: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var v [3]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, fmt.Errorf("disk usage %q: %w", res.Stdout, err)
		}
	}
	return (v[0] - v[1]) * v[2], nil
}

// forkErr is a Fork's error, or its first fork's.
func forkErr(fs []goruntime.ForkResult, err error) error {
	if err != nil {
		return err
	}
	for i, f := range fs {
		if f.Err != nil {
			closeForks(context.Background(), fs)
			return fmt.Errorf("fork %d: %w", i, f.Err)
		}
	}
	return nil
}

func closeForks(ctx context.Context, fs []goruntime.ForkResult) {
	for _, f := range fs {
		if f.Sandbox != nil {
			_ = f.Sandbox.Close(context.WithoutCancel(ctx))
		}
	}
}
