package local

// The memory budget of a user's sandboxes (Options.MemoryBudgetBytes).
// A backend that is not root keeps each sandbox's disk in memory
// (storage.go) and promises the sandbox its disk on top of MemoryBytes:
// its cgroup's memory limit is MemoryBytes+DiskBytes. Nothing else
// bounds the sum, and a few sandboxes filling their disks would take the
// host's memory and wake its OOM killer. So a sandbox is admitted only
// when its limit and those of the user's live sandboxes, in every
// process and state directory, add up to at most the budget
// (cgroups.NewWithin, which counts the cgroups themselves under a lock
// on the user's group). A sandbox waiting in the warm pool is promised
// poolMemoryBytes until it is claimed, when its limit is raised within
// the budget (cgroups.RaiseMemory); when an Open does not fit, the pool
// gives way first (warmPool.evict), so a pool never locks Opens out.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
)

// memoryBudgetShare is the default budget's share of the host's memory:
// 1/memoryBudgetShare of MemTotal. Half leaves the other half to the
// host and whatever else runs on it (the user's editor, builds, other
// users), whatever the user's sandboxes hold.
const memoryBudgetShare = 2

// poolMemoryBytes is the memory limit of a sandbox waiting in the warm
// pool under a budget, until it is claimed: enough for its runtime
// server and the pool's warm-up command (MinMemoryBytes), so that a
// pool holds little of the budget.
const poolMemoryBytes = MinMemoryBytes

// defaultMemoryBudget is Options.MemoryBudgetBytes's default on a host
// with memTotal bytes of memory; 0 (no budget) when that is unknown.
func defaultMemoryBudget(memTotal int64) int64 { return memTotal / memoryBudgetShare }

// hostMemTotal is the host's memory, MemTotal of /proc/meminfo, in
// bytes; 0 when it cannot be read.
func hostMemTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// budgetProblem rejects a memory budget that holds no sandbox, when
// sandboxes' disks are in memory (memoryDisk): none could ever open.
func (o Options) budgetProblem(memoryDisk bool) error {
	if !memoryDisk || o.MemoryBudgetBytes <= 0 || o.MemoryBudgetBytes >= o.chargedMemory(true) {
		return nil
	}
	return fmt.Errorf("local backend: memory budget %s (Options.MemoryBudgetBytes) holds no sandbox: each is promised %s, its memory limit and its disk, which is in memory (Options.MemoryBytes + Options.DiskBytes): raise the budget or lower those",
		sizeText(o.MemoryBudgetBytes), sizeText(o.chargedMemory(true)))
}

// budget admits a backend's sandboxes within the memory budget.
type budget struct {
	opts       Options
	memoryDisk bool                           // sandboxes' disks are in memory: only they are budgeted
	evict      func(ctx context.Context) bool // the warm pool gives way (warmPool.evict)
}

// bytes is the budget the sandboxes are admitted against, 0 for none:
// only disks in memory are budgeted.
func (g budget) bytes() int64 {
	if !g.memoryDisk {
		return 0
	}
	return g.opts.MemoryBudgetBytes
}

// heldLimits are the limits of a sandbox waiting in the warm pool under
// a budget: lim with the memory limit poolMemoryBytes (no more than
// lim's), until its claim raises it (budget.claim).
func heldLimits(lim cgroups.Limits) cgroups.Limits {
	lim.MemoryBytes = min(lim.MemoryBytes+lim.FilesBytes, poolMemoryBytes)
	lim.FilesBytes = 0
	return lim
}

// newCgroup makes the cgroup of a new sandbox id, a pooled one (for the
// warm pool) or not, within the memory budget when there is one. An Open
// the budget refuses makes room by ending this backend's pool sandboxes
// and tries once more. Errors wrap goruntime.ErrUnavailable, and
// ErrHostLimit when the budget refused.
func (g budget) newCgroup(ctx context.Context, id string, pooled bool) (*cgroups.Cgroup, error) {
	lim := g.opts.cgroupLimits(pooled, g.memoryDisk)
	lim.GroupWeight = g.opts.groupCPUWeight()
	budget := g.bytes()
	if budget == 0 {
		cg, err := cgroups.New(id, lim)
		if err != nil {
			return nil, fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
		}
		return cg, nil
	}
	if pooled {
		lim = heldLimits(lim)
	}
	cg, err := cgroups.NewWithin(ctx, id, lim, budget)
	var over *cgroups.OverBudget
	if errors.As(err, &over) && !pooled && g.evict(ctx) {
		cg, err = cgroups.NewWithin(ctx, id, lim, budget)
	}
	if err != nil {
		return nil, g.err(err)
	}
	return cg, nil
}

// claim raises the memory limit of s, claimed from the warm pool,
// to a sandbox's (heldLimits kept it low) within the budget, making room
// as newCgroup does. With no budget it does nothing.
func (g budget) claim(ctx context.Context, s *Sandbox) error {
	budget := g.bytes()
	if budget == 0 {
		return nil
	}
	lim := g.opts.cgroupLimits(false, g.memoryDisk)
	err := s.meta.Cgroup.RaiseMemory(ctx, lim, budget)
	var over *cgroups.OverBudget
	if errors.As(err, &over) && g.evict(ctx) {
		err = s.meta.Cgroup.RaiseMemory(ctx, lim, budget)
	}
	if err != nil {
		return g.err(err)
	}
	return nil
}

// err is the error of a sandbox the budget refused (an
// *cgroups.OverBudget: wraps ErrHostLimit, naming the settings), or of a
// cgroup that could not be made or raised; both wrap
// goruntime.ErrUnavailable.
func (g budget) err(err error) error {
	var over *cgroups.OverBudget
	if !errors.As(err, &over) {
		return fmt.Errorf("local backend: %w: %w", err, goruntime.ErrUnavailable)
	}
	return fmt.Errorf("local backend: %w: the memory budget of this user's sandboxes (uid %d) has no room: its live sandboxes (%d, of every process and state directory) are promised %s of %s "+
		"(Options.MemoryBudgetBytes, by default half the host's memory), and one more needs %s (a sandbox is promised %s for its processes, Options.MemoryBytes, and its %s disk, which is in memory, Options.DiskBytes): "+
		"close sandboxes, lower Options.MemoryBytes or Options.DiskBytes, or raise Options.MemoryBudgetBytes: %w",
		ErrHostLimit, os.Geteuid(), over.Live, sizeText(over.Promised), sizeText(over.Budget), sizeText(over.Need),
		sizeText(g.opts.MemoryBytes), sizeText(g.opts.DiskBytes), goruntime.ErrUnavailable)
}

// sizeText is n bytes as a person reads it: whole GiB as "4 GiB", else
// MiB ("640 MiB").
func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
