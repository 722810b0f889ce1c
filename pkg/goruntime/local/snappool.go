package local

// Forks from the warm pool (method overlay, snapcow.go): a sandbox made
// from a snapshot (a fork, OpenSnapshot) is a pool sandbox layered over
// the snapshot's tree in place, when the pool has one, rather than a
// start layered from the outset. The pool sandbox was started by the
// ordinary start path, with every protection and limit and an identity
// of its own (sandbox ID, host uid, hostname, /tmp), and nothing has run
// in it but the pool's warm-up; layering it mounts, as this process
// (root) and with Layer's options, the overlays a layered start would
// have had over its /app and HOME, in its gate's mount namespace and in
// its own (internal/disk's layerlive.go). Its runtime server, started
// before, opens /app again once the path names the overlay
// (internal/server's baseroot.go); commands resolve it afresh anyway.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

// openLayered opens a sandbox layered on m's tree: a claim from the warm
// pool layered in place when it has a sandbox ready or one of its starts
// is under way for it (take, as Open), else a start layered from the
// outset. A pool sandbox that cannot be layered is closed, and the start
// made instead.
func (sn snapshotter) openLayered(ctx context.Context, m snapshot.Meta) (*Sandbox, error) {
	b := sn.b
	if s := b.pool.take(ctx, b.opts.StartTimeout); s != nil {
		err := sn.layerLive(ctx, s, m)
		if err == nil {
			err = b.budget.claim(ctx, s)
		}
		if err == nil {
			b.pool.refillAfter(s)
			return s, nil
		}
		_ = s.Close(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return nil, err
		}
		b.opts.Logger.WarnContext(ctx, "local backend: a pool sandbox could not be layered over a snapshot; starting one layered from the outset", "snapshot", m.ID, "err", err)
	}
	s, err := b.open(withLower(ctx, m), nil, 0)
	if err == nil {
		b.pool.refillAfter(s)
	}
	return s, err
}

// layerLive layers the running pool sandbox s over m's tree (snappool.go
// says how), recording it as the tree's user first, and records its
// disk's new layers in its state file.
func (sn snapshotter) layerLive(ctx context.Context, s *Sandbox, m snapshot.Meta) error {
	b := sn.b
	if s.meta.Disk == nil || s.meta.Disk.Memory || !s.meta.Disk.LeftHost || s.seed == "" || s.meta.Disk.Lower != "" {
		return fmt.Errorf("local sandbox %s: not a pool sandbox on a disk of its own", s.meta.ID)
	}
	st := sn.snapshots()
	if err := checkTree(st.Tree(m)); err != nil {
		return fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	if err := st.Use(m, s.meta.ID); err != nil {
		return fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	refreshCache(filepath.Join(st.Tree(m), cacheRel), time.Now())
	gateNS, err := s.mountNS(s.meta.PID)
	if err != nil {
		return err
	}
	defer gateNS.Close()
	ownNS, err := s.mountNS(s.meta.Server)
	if err != nil {
		return err
	}
	defer ownNS.Close()
	if same, err := sameFile(gateNS, ownNS); err != nil || same {
		return fmt.Errorf("local sandbox %s: its runtime server is not in a mount namespace of its own (err %v)", s.meta.ID, err)
	}
	var l layout // relative paths
	live := disk.Live{Disk: gateNS, Sandbox: ownNS, Points: map[string]string{l.app(): appDir, l.home(): homeDir},
		CacheDirs: stateDir(b.opts.StateDir).cacheDirs()}
	d := *s.meta.Disk
	if err := d.LayerLive(diskLayout(), treeLayers(st.Tree(m)), s.seed, s.meta.HostUID, live); err != nil {
		return fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	s.meta.Disk = &d
	if err := writeJSON(s.l.meta(), s.meta); err != nil {
		return fmt.Errorf("local sandbox %s: write sandbox state: %w", s.meta.ID, err)
	}
	b.opts.Logger.DebugContext(ctx, "local sandbox from the warm pool layered over a snapshot", "id", s.meta.ID, "snapshot", m.ID)
	return nil
}

// mountNS opens the mount namespace of pid, one of s's processes (in its
// cgroup before and after the open, so that a pid reused by another
// process is never taken for it).
func (s *Sandbox) mountNS(pid int) (*os.File, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("local sandbox %s: a process of it is not recorded", s.meta.ID)
	}
	if err := s.holds(pid); err != nil {
		return nil, fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("local sandbox %s: open its mount namespace: %w", s.meta.ID, err)
	}
	if err := s.holds(pid); err != nil {
		f.Close()
		return nil, fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	return f, nil
}

// sameFile reports whether a and b are the same file (namespace).
func sameFile(a, b *os.File) (bool, error) {
	ai, err := a.Stat()
	if err != nil {
		return false, err
	}
	bi, err := b.Stat()
	if err != nil {
		return false, err
	}
	return os.SameFile(ai, bi), nil
}
