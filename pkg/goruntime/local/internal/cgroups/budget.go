package cgroups

// A memory budget: the memory limits of a user's live sandbox cgroups,
// added up, stay within a sum the caller states. Each cgroup is charged
// at most its own limit, so the sandboxes together are never charged
// more than the budget, whatever they hold (a memory disk's files
// included). The cgroups themselves are the account, read under a lock
// on a directory every backend of the user shares, so that backends in
// other processes and of other state directories count, and two admitted
// at once cannot both take the last room:
//
//   - cgroup v1: the group root delegated to the user (delegate.go),
//     which holds every sandbox cgroup of the user;
//   - cgroup v2 in a scope JoinSystemdScope asked for: the sandboxes'
//     groups of every such scope beside it (one per process), locked
//     through the scopes' parent; in another delegated cgroup, its own
//     group.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// OverBudget is the error NewWithin and RaiseMemory return when the
// memory limit asked for does not fit the budget beside those of the
// live sandbox cgroups.
type OverBudget struct {
	Budget   int64 // the budget the limits must stay within
	Promised int64 // the memory limits of the live cgroups counted, added up
	Live     int   // how many cgroups they are
	Need     int64 // the memory limit asked for
}

func (e *OverBudget) Error() string {
	return fmt.Sprintf("%d live sandbox cgroups have memory limits of %d MiB in all, and %d MiB more would pass the budget of %d MiB",
		e.Live, e.Promised>>20, e.Need>>20, e.Budget>>20)
}

// startGrace is how long a cgroup without processes still counts: a
// start makes its sandbox's cgroup, then moves the sandbox's first
// process in within moments. An empty cgroup older than this belongs to
// a sandbox whose processes are gone (its owner was killed; its cgroup
// waits for a prune), which holds no memory a limit needs to promise.
const startGrace = time.Minute

// budgetScope is where the cgroups a budget counts live: the directories
// holding sandbox cgroups, and the directory locked while a limit is
// admitted.
type budgetScope struct {
	lock   string
	groups []string
	v2     bool
}

// budgetScope is l's budget scope (see the top of this file).
func (l layout) budgetScope() budgetScope {
	if l.v1 != nil {
		g := l.v1["memory"]
		return budgetScope{lock: g, groups: []string{g}}
	}
	sc := budgetScope{lock: l.v2Own, groups: []string{l.v2}, v2: true}
	if isOurScope(filepath.Base(l.v2Own)) {
		parent := filepath.Dir(l.v2Own)
		others, _ := filepath.Glob(filepath.Join(parent, scopePrefix+"*.scope", groupName))
		sc.lock = parent
		for _, g := range others {
			if g != l.v2 {
				sc.groups = append(sc.groups, g)
			}
		}
	}
	return sc
}

// NewWithin is New for a sandbox whose cgroup must fit budget: it is made
// only when its memory limit and those of the live sandbox cgroups in
// the budget's scope add up to at most budget, else the error is an
// *OverBudget and nothing is made.
func NewWithin(ctx context.Context, id string, lim Limits, budget int64) (*Cgroup, error) {
	l, err := findLayout()
	if err != nil {
		return nil, err
	}
	sc := l.budgetScope()
	if l.v1 != nil {
		// What newV1 makes anyway (the delegated group exists already).
		if err := os.MkdirAll(sc.lock, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup v1 memory group %s: %w", sc.lock, err)
		}
	}
	unlock, err := lockDir(ctx, sc.lock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := sc.admit("", lim.memoryLimit(), budget, time.Now()); err != nil {
		return nil, err
	}
	return l.create(id, lim)
}

// RaiseMemory raises cg's memory limits to lim's (a sandbox started with
// lower ones: a warm pool's, until it is claimed) when they and those of
// the other live sandbox cgroups in the budget's scope add up to at most
// budget; else the error is an *OverBudget and the limits stay.
func (cg *Cgroup) RaiseMemory(ctx context.Context, lim Limits, budget int64) error {
	l, err := findLayout()
	if err != nil {
		return err
	}
	sc := l.budgetScope()
	unlock, err := lockDir(ctx, sc.lock)
	if err != nil {
		return err
	}
	defer unlock()
	if err := sc.admit(cg.Memory, lim.memoryLimit(), budget, time.Now()); err != nil {
		return err
	}
	return cg.setMemory(lim)
}

// setMemory writes lim's memory limits over cg's lower ones: on v1 the
// RAM+swap limit first (it may not be below the RAM limit), then the RAM
// limit and the socket buffers'.
func (cg *Cgroup) setMemory(lim Limits) error {
	mem := strconv.FormatInt(lim.memoryLimit(), 10)
	type write struct {
		file, value string
		optional    bool // absent without swap accounting or kmem
	}
	writes := []write{{"memory.max", mem, false}}
	if !cg.V2 {
		writes = []write{
			{"memory.memsw.limit_in_bytes", mem, true},
			{"memory.limit_in_bytes", mem, false},
			{"memory.kmem.tcp.limit_in_bytes", strconv.FormatInt(socketBytes(lim.MemoryBytes), 10), true},
		}
	}
	for _, w := range writes {
		p := filepath.Join(cg.Memory, w.file)
		err := os.WriteFile(p, []byte(w.value), 0o644)
		if err != nil && !(w.optional && errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("set cgroup limit %s=%s: %w", p, w.value, err)
		}
	}
	return nil
}

// lockDir takes an exclusive flock on dir, waiting for it until ctx ends,
// and returns what releases it. flock works on a cgroup directory like
// on any other, and every process that opens it gets a lock of its own.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s to lock the sandboxes' memory budget: %w", dir, err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the last descriptor releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s for the sandboxes' memory budget: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the lock on %s (the sandboxes' memory budget): %w", dir, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// admit returns an *OverBudget unless need fits budget beside the memory
// limits of the live cgroups in sc (the one at except left out: its own,
// being raised).
func (sc budgetScope) admit(except string, need, budget int64, now time.Time) error {
	sum, live, err := promised(sc.groups, sc.v2, except, now)
	if err != nil {
		return fmt.Errorf("count the memory limits of the sandboxes' cgroups: %w", err)
	}
	if need > budget-sum { // budget-sum cannot overflow: both are at least 0
		return &OverBudget{Budget: budget, Promised: sum, Live: live, Need: need}
	}
	return nil
}

// promised adds up the memory limits of the live cgroups in groups (the
// one at except left out): those holding processes, and those younger
// than startGrace (a start moves its first process in moments after
// making the cgroup). It saturates at math.MaxInt64 (a cgroup without a
// limit). A group or cgroup that does not exist (removed meanwhile)
// counts nothing.
func promised(groups []string, v2 bool, except string, now time.Time) (sum int64, live int, err error) {
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
	}
	except = filepath.Clean(except)
	for _, g := range groups {
		entries, err := os.ReadDir(g)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		for _, e := range entries {
			dir := filepath.Join(g, e.Name())
			if !e.IsDir() || dir == except {
				continue
			}
			n, ok, err := liveLimit(dir, limitFile, now)
			if err != nil {
				return 0, 0, err
			}
			if ok {
				live++
				sum = min(math.MaxInt64-n, sum) + n // sum + n, at most MaxInt64
			}
		}
	}
	return sum, live, nil
}

// liveLimit is the memory limit of the cgroup dir, read from limitFile,
// and whether it is live (see promised).
func liveLimit(dir, limitFile string, now time.Time) (int64, bool, error) {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if strings.TrimSpace(string(procs)) == "" {
		fi, err := os.Stat(dir)
		if err != nil || now.Sub(fi.ModTime()) >= startGrace {
			return 0, false, nil
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, limitFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v := strings.TrimSpace(string(data))
	if v == "max" {
		return math.MaxInt64, true, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %q is not a memory limit", filepath.Join(dir, limitFile), v)
	}
	return max(n, 0), true, nil
}
