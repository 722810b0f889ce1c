package local

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Telling that a command ran into the disk quota. The label (Limit
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

// diskUsage is a disk's free bytes and inodes at one moment.
type diskUsage struct {
	freeBytes, freeInodes uint64
}

func (d disk) usage() (diskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.Dir, &st); err != nil {
		return diskUsage{}, err
	}
	return diskUsage{freeBytes: st.Bavail * uint64(st.Bsize), freeInodes: st.Ffree}, nil
}

// full reports whether u leaves no room for a write: under fullSlack
// bytes, or no inode.
func (u diskUsage) full() bool { return u.freeInodes == 0 || u.freeBytes < fullSlack }

// diskSampler watches a disk while a command runs: whether it became
// full (was not at one sample, was at the next) and how it was then.
type diskSampler struct {
	d     disk
	stop  chan struct{}
	done  chan struct{}
	ended sync.Once

	mu       sync.Mutex
	lastFull bool       // at the last sample
	filled   *diskUsage // the first sample at which it became full
}

// sampleDisk starts sampling d; a nil d (no disk quota) samples nothing.
func sampleDisk(d *disk) *diskSampler {
	if d == nil {
		return nil
	}
	ds := &diskSampler{d: *d, stop: make(chan struct{}), done: make(chan struct{})}
	if u, err := ds.d.usage(); err == nil {
		ds.lastFull = u.full()
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

// end stops sampling; more calls do nothing, as does a nil ds.
func (ds *diskSampler) end() {
	if ds == nil {
		return
	}
	ds.ended.Do(func() { close(ds.stop) })
	<-ds.done
}

func (ds *diskSampler) take() {
	u, err := ds.d.usage()
	if err != nil {
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if u.full() && !ds.lastFull && ds.filled == nil {
		ds.filled = &u
	}
	ds.lastFull = u.full()
}

// finish stops sampling and reports whether the command ran into the
// quota: the disk is full now, or became full while it ran; with the
// usage then (the note names bytes or inodes from it).
func (ds *diskSampler) finish() (diskUsage, bool) {
	if ds == nil {
		return diskUsage{}, false
	}
	ds.end()
	if after, err := ds.d.usage(); err == nil && after.full() {
		return after, true
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.filled != nil {
		return *ds.filled, true
	}
	return diskUsage{}, false
}

// diskNote is the note appended to a command's stderr when it ran the
// sandbox's disk out of bytes or inodes.
func (b *Backend) diskNote(u diskUsage) string {
	if u.freeInodes == 0 {
		return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's inode quota is used up: %d files and directories (Options.DiskInodes); delete files to go on.]\n", b.opts.DiskInodes)
	}
	return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's disk quota is full: %d MiB (Options.DiskBytes) for /app, HOME with its caches and /tmp together; delete files to go on.]\n", b.opts.DiskBytes>>20)
}
