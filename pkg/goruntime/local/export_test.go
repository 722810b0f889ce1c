package local

import (
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
)

// SetFileCallDeadlines gives b's file calls (list, read, upload, unpack)
// the deadline floor plus perMiB per MiB moved, instead of callFloor and
// callPerMiB, so a test of a server that never answers ends fast.
func SetFileCallDeadlines(b *Backend, floor, perMiB time.Duration) {
	b.callDeadlines = callDeadlines{floor: floor, perMiB: perMiB}
}

// ChargedMemory is the most memory b's sandboxes are charged before their
// memory limit is hit: Options.MemoryBytes, plus Options.DiskBytes when
// their disks are in memory (a backend that is not root).
func ChargedMemory(b *Backend) int64 { return b.opts.chargedMemory(b.host.memoryDisk) }

// SetMaxLoopDevices makes b refuse a new sandbox disk while n or more loop
// devices are attached on the host, as the kernel would past its limit.
func SetMaxLoopDevices(b *Backend, n int) { b.disks.maxLoops = n }

// SetTaskLimit makes b count the host's tasks against n instead of
// kernel.pid_max and kernel.threads-max.
func SetTaskLimit(b *Backend, n int) { b.taskLimit = n }

// SeedLockPath is the lock file of b's base seed build: a process that
// holds it (flock) keeps b's build from starting, as another process
// building the seed does.
func SeedLockPath(b *Backend) (string, error) { return b.seeds.LockPath() }

// WarmPoolStarting is how many pool starts of b are under way.
func WarmPoolStarting(b *Backend) int {
	_, starting, _ := b.pool.spares.Stats()
	return starting
}

// SetWarmPoolShrinkAfter makes b's warm pool, once grown by demand, go
// back to its size after d without an Open finding it empty; a pool grown
// already counts d from the last such Open.
func SetWarmPoolShrinkAfter(b *Backend, d time.Duration) {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	b.pool.shrinkAfter = d
	if b.pool.shrink != nil {
		b.pool.shrink.Reset(max(0, d-time.Since(b.pool.missed)))
	}
}

// HoldStarts takes every one of b's start slots (open.go), waiting for
// the starts under way to end: until release is called, a sandbox start
// (an Open's own, or the warm pool's) waits for a slot, under way but
// unable to finish, so a test sees the starts begun without racing them.
// release may be called more than once.
func HoldStarts(b *Backend) (release func()) {
	for range cap(b.starts) {
		b.starts <- struct{}{}
	}
	return sync.OnceFunc(func() {
		for range cap(b.starts) {
			<-b.starts
		}
	})
}

// WarmPoolWaiting is how many Opens of b wait for a pool start under way.
func WarmPoolWaiting(b *Backend) int {
	_, _, waiting := b.pool.spares.Stats()
	return waiting
}

// WarmPoolStartsWaitedFor is how many of b's pool starts under way an
// Open waits for (one it was assigned to, poolweight.go).
func WarmPoolStartsWaitedFor(b *Backend) int {
	b.pool.weights.Lock()
	defer b.pool.weights.Unlock()
	n := 0
	for _, ps := range b.pool.starting {
		if ps.waiters > 0 {
			n++
		}
	}
	return n
}

// WarmPoolState is, in one snapshot, how many sandboxes b's warm pool
// holds ready, how many of its starts are under way and how many claimed
// sandboxes it waits for to settle before filling past one.
func WarmPoolState(b *Backend) (ready, starting, settling int) {
	b.pool.mu.Lock() // settling changes under it; ready and starting under the spares' own
	defer b.pool.mu.Unlock()
	ready, starting, _ = b.pool.spares.Stats()
	return ready, starting, b.pool.settling
}

// WarmPoolReadyIDs are the IDs of the sandboxes waiting in b's warm pool.
func WarmPoolReadyIDs(b *Backend) []string {
	ready := b.pool.spares.Ready()
	ids := make([]string, len(ready))
	for i, s := range ready {
		ids[i] = s.meta.ID
	}
	return ids
}

// WarmPoolClaim claims a live sandbox from b's warm pool as Open does,
// closing those found dead, and returns its ID ("" when none is left).
func WarmPoolClaim(b *Backend) string {
	if s := b.pool.claim(); s != nil {
		return s.meta.ID
	}
	return ""
}

// HoldPoolStarts holds each warm-pool start of b begun from now on once
// its cgroup is made and weighed: it sends the cgroup's CPU directory
// ("" without a cpu controller) on made, then waits until release is
// called. release may be called more than once.
func HoldPoolStarts(b *Backend) (made <-chan string, release func()) {
	ch := make(chan string, 16)
	held := make(chan struct{})
	b.pool.weights.Lock()
	defer b.pool.weights.Unlock()
	b.pool.madeHook = func(cg *cgroups.Cgroup) {
		select {
		case ch <- cg.CPU:
		default:
		}
		<-held
	}
	return ch, sync.OnceFunc(func() { close(held) })
}

// LayeredInPlace reports whether sb, a sandbox made from a snapshot, is
// a pool sandbox layered over it while it ran (snappool.go), not a start
// layered from the outset.
func LayeredInPlace(sb goruntime.Sandbox) bool {
	s, ok := sb.(*Sandbox)
	return ok && s.meta.Disk != nil && s.meta.Disk.LayeredLive
}
