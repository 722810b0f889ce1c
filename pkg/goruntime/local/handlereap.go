package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// The handle reaper (handleStore.reap) and how a handle's sandbox ends
// (Backend.destroy).

// handleReapEvery is how often a backend reaps expired handles.
const handleReapEvery = 10 * time.Second

// sandboxRuns reports whether the processes of the sandbox id of the
// directory sandboxes run.
func sandboxRuns(sandboxes, id string) bool {
	var m meta
	data, err := os.ReadFile(layout{dir: filepath.Join(sandboxes, id)}.meta())
	return err == nil && json.Unmarshal(data, &m) == nil && procfs.Alive(m.PID, m.StartTime)
}

// destroy ends sandbox id (live or dead) and removes what it left: its
// processes, cgroup, disk and directory.
func (b *Backend) destroy(ctx context.Context, id string) error {
	if !sandboxid.Valid(id) {
		return nil
	}
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	data, err := os.ReadFile(l.meta())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return tree.Remove(l.dir)
		}
		return err
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("sandbox %s: bad state file: %w", id, err)
	}
	if m.Disk != nil {
		l.disk = m.Disk.Dir
		l.memory = m.Disk.Memory
	}
	s := &Sandbox{b: b, l: l, meta: m, cl: l.client(serverUID(m.HostUID), b.opts.OutputBytes), keep: keepSet(m.Keep)}
	return s.Close(ctx)
}

// reap ends the handles idle past their TTL, and forgets those
// whose sandbox ended, unless a process has them attached (a shared lock
// on the file).
func (h handleStore) reap(ctx context.Context) {
	root := h.root
	owners, _ := os.ReadDir(root)
	now := time.Now()
	for _, o := range owners {
		dir := filepath.Join(root, o.Name())
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			if strings.HasSuffix(e.Name(), ".tmp") {
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
					_ = os.Remove(path)
				}
				continue
			}
			rec, fi, err := readHandleFile(path)
			if err != nil {
				continue
			}
			expired := now.After(fi.ModTime().Add(rec.TTL))
			if !expired && h.alive(rec.Sandbox) {
				continue
			}
			h.reapOne(ctx, path, rec, expired)
		}
		_ = os.Remove(dir) // once empty
	}
}

// reapOne removes one handle found expired or with its sandbox ended,
// unless it is attached.
func (h handleStore) reapOne(ctx context.Context, path string, rec handleRecord, expired bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // attached: its holder renews it on release
	}
	// Renewed between the read and the lock?
	if fi, err := f.Stat(); err != nil || (expired && !time.Now().After(fi.ModTime().Add(rec.TTL))) {
		return
	}
	if os.Remove(path) != nil {
		return // another reaper or a delete got it
	}
	if err := h.destroy(context.WithoutCancel(ctx), rec.Sandbox); err != nil {
		h.logger.Warn("local sandbox handle: remove its sandbox", "handle", rec.ID, "sandbox", rec.Sandbox, "err", err)
	}
	why := "its sandbox ended"
	if expired {
		why = "idle past its TTL"
	}
	h.logger.Info("local sandbox handle reaped", "handle", rec.ID, "sandbox", rec.Sandbox, "why", why, "ttl", rec.TTL)
}

// runReaper reaps handles at once and then every handleReapEvery
// until ctx ends (Backend.Close).
func (h handleStore) runReaper(ctx context.Context) {
	t := time.NewTicker(handleReapEvery)
	defer t.Stop()
	for {
		h.reap(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
