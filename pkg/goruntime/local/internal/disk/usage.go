package disk

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Telling that a command ran into the disk quota. The label (goruntime's
// LimitDisk, outcome disk_limit, the note naming the quota) comes from the
// sandbox's file system's own counters, never from text: a command can
// print "no space left on device" (and ENOSPC has other causes, e.g. no
// pty left in /dev/ptmx). The disk counts as full when its free bytes are
// under fullSlack or it has no free inode; the command ran into the quota
// when the disk is full after it, or became full at one of the samples
// taken every diskSampleInterval while it ran (a command that filled the
// disk and then deleted what it wrote, as the go command deletes its work
// directory, is caught when the fill lasted a sample; a shorter one goes
// unlabelled, and its own output still says ENOSPC). A disk already full
// when the command started does not count until it is full after it: a
// command that frees space is not labelled.
const (
	// fullSlack is how few free bytes count as full: ext4 refuses a
	// write a few blocks short of zero (reserved metadata clusters).
	fullSlack = 256 << 10
	// diskSampleInterval is how often the disk is sampled while a
	// command runs; statfs costs about a microsecond.
	diskSampleInterval = 200 * time.Millisecond
)

// Usage is a disk's free bytes and inodes at one moment.
type Usage struct {
	FreeBytes, FreeInodes uint64
}

// Usage reads the disk's free bytes and inodes now.
func (d Disk) Usage() (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.Dir, &st); err != nil {
		return Usage{}, fmt.Errorf("free space on disk %s: %w", d.Dir, err)
	}
	return Usage{FreeBytes: st.Bavail * uint64(st.Bsize), FreeInodes: st.Ffree}, nil
}

// Full reports whether u leaves no room for a write: under fullSlack
// bytes, or no inode.
func (u Usage) Full() bool { return u.FreeInodes == 0 || u.FreeBytes < fullSlack }

// Sampler watches a disk while a command runs: whether it became
// full (was not at one sample, was at the next) and how it was then.
type Sampler struct {
	d     Disk
	stop  chan struct{}
	done  chan struct{}
	ended sync.Once

	mu       sync.Mutex
	lastFull bool   // at the last sample
	filled   *Usage // the first sample at which it became full
}

// Sample starts sampling d; a nil d (no disk quota) samples nothing.
func Sample(d *Disk) *Sampler {
	if d == nil {
		return nil
	}
	ds := &Sampler{d: *d, stop: make(chan struct{}), done: make(chan struct{})}
	if u, err := ds.d.Usage(); err == nil {
		ds.lastFull = u.Full()
	}
	go func() {
		defer close(ds.done)
		t := time.NewTicker(diskSampleInterval)
		defer t.Stop()
		for {
			select {
			case <-ds.stop:
				return
			case <-t.C:
				ds.take()
			}
		}
	}()
	return ds
}

// End stops sampling; more calls do nothing, as does a nil ds.
func (ds *Sampler) End() {
	if ds == nil {
		return
	}
	ds.ended.Do(func() { close(ds.stop) })
	<-ds.done
}

func (ds *Sampler) take() {
	u, err := ds.d.Usage()
	if err != nil {
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if u.Full() && !ds.lastFull && ds.filled == nil {
		ds.filled = &u
	}
	ds.lastFull = u.Full()
}

// Finish stops sampling and reports whether the command ran into the
// quota: the disk is full now, or became full while it ran; with the
// usage then (the note names bytes or inodes from it).
func (ds *Sampler) Finish() (Usage, bool) {
	if ds == nil {
		return Usage{}, false
	}
	ds.End()
	if after, err := ds.d.Usage(); err == nil && after.Full() {
		return after, true
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.filled != nil {
		return *ds.filled, true
	}
	return Usage{}, false
}
