package local

// Sandbox disks (internal/disk) as the backend uses them: what a disk
// holds (diskLayout), the pool of ready disks Open claims from, and the
// prune of disks nobody will claim.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/spares"
)

// spareDisksKept is how many ready disks the backend keeps: a disk is made
// in milliseconds from its template (internal/disk), but its first one
// of a kind makes the template (mkfs.ext4, ~0.2 s).
const spareDisksKept = 2

// diskMounts holds the disks' mount points, where a sandbox's host uid
// reaches them.
const diskMounts = runRoot + "/disks"

// diskLayoutVersion names the layout diskLayout gives a disk; spares made
// with another layout (by an older version) are not claimed, and pruned.
const diskLayoutVersion = "l2"

// diskLayout is what a sandbox's disk holds: its writable directories
// (layout's, relative to the disk's root) and its GOCACHE, where the
// seed's overlay is mounted.
func diskLayout() disk.Layout {
	var l layout // relative paths: no dir, no disk
	return disk.Layout{
		Dirs:   []string{l.etc(), l.app(), l.home(), filepath.Dir(l.gocache()), l.gocache(), l.tmp(), l.run()},
		Public: []string{l.etc()}, // root's; the sandbox's passwd, group, hosts
		Cache:  l.gocache(),
		Owned:  []string{l.app(), l.home(), filepath.Dir(l.gocache()), l.tmp(), l.run()},
	}
}

// diskSpec is how the backend makes a disk linked to seed.
func (b *Backend) diskSpec(seed string) disk.Spec {
	return disk.Spec{Images: b.disksDir(), Mounts: diskMounts, Bytes: b.opts.DiskBytes, Inodes: b.opts.DiskInodes, Seed: seed, Layout: diskLayout(), MaxLoops: b.maxLoops}
}

// disksDir holds images and the spare pool.
func (b *Backend) disksDir() string { return stateDir(b.opts.StateDir).disks() }

// spareDiskDir holds one marker file per ready disk made for this seed,
// size and inode count; the marker's name is the disk's id.
func (b *Backend) spareDiskDir(seed string) string {
	return filepath.Join(b.disksDir(), "spare", fmt.Sprintf("%s-%d-%d-%s", filepath.Base(seed), b.opts.DiskBytes, b.opts.DiskInodes, diskLayoutVersion))
}

// claimDisk takes a ready disk from the spare pool, or makes one, and
// gives its directories to uid (0: leave them to root).
func (b *Backend) claimDisk(ctx context.Context, seed string, uid int) (disk.Disk, error) {
	d, ok := b.claimSpareDisk(seed)
	if !ok {
		var err error
		if d, err = disk.Make(ctx, sandboxid.New(), b.diskSpec(seed)); err != nil {
			return d, err
		}
	}
	if err := d.Claim(diskLayout(), uid); err != nil {
		d.Remove()
		return d, err
	}
	return d, nil
}

// claimSpareDisk takes a ready disk: removing its marker is the claim
// (only one remover succeeds), then the disk must still be mounted (a
// reboot unmounts spares but leaves their markers).
func (b *Backend) claimSpareDisk(seed string) (disk.Disk, bool) {
	dir := b.spareDiskDir(seed)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return disk.Disk{}, false
	}
	for _, e := range entries {
		if !sandboxid.Valid(e.Name()) || os.Remove(filepath.Join(dir, e.Name())) != nil {
			continue
		}
		d := disk.ByID(b.disksDir(), diskMounts, e.Name())
		if d.Complete(diskLayout()) {
			return d, true
		}
		b.opts.Logger.Warn("local backend: a spare disk is not mounted or not laid out; removing it", "disk", d.Dir)
		d.Remove()
	}
	return disk.Disk{}, false
}

// newSpareDisks is the backend's spare disks, a pool per seed (package
// spares): each fills a directory of markers, one per ready disk, that
// any process of the state directory may claim (claimSpareDisk), one
// disk at a time.
func (b *Backend) newSpareDisks() *spares.Keyed[string, disk.Disk] {
	return spares.NewKeyed(func(seed string) *spares.Pool[disk.Disk] {
		return spares.New(spares.Config[disk.Disk]{
			Make: func(ctx context.Context) (disk.Disk, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				return disk.Make(ctx, sandboxid.New(), b.diskSpec(seed))
			},
			Shared:   spareDiskShelf(b.spareDiskDir(seed)),
			Discard:  disk.Disk.Remove,
			Parallel: 1,
			RetryMin: spareRetryMin,
			RetryMax: spareRetryMax,
			OnError: func(err error, _ time.Duration) {
				b.opts.Logger.Debug("local backend: make spare disk", "err", err)
			},
		})
	})
}

// spareDiskShelf is a directory of markers, one per ready disk, named
// after the disk's id.
type spareDiskShelf string

func (d spareDiskShelf) Len() (int, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return len(entries), err
}

func (d spareDiskShelf) Put(dk disk.Disk) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(string(d), dk.ID()), nil, 0o600)
}

// refillSpareDisks tops the ready disks made for seed up to
// spareDisksKept.
func (b *Backend) refillSpareDisks(seed string) { b.spareDisks.Fill(seed, spareDisksKept) }

// pruneDisks removes the spare disks no backend claims (their group is of
// an older layout, or of a seed that is gone or superseded), then, with
// disk.Prune, the disks of this state directory that no sandbox and no
// spare marker names. live holds the IDs of live sandboxes' disks.
func (b *Backend) pruneDisks(live map[string]bool) {
	keep := map[string]bool{}
	for id := range live {
		keep[id] = true
	}
	if groups, err := os.ReadDir(filepath.Join(b.disksDir(), "spare")); err == nil {
		for _, g := range groups {
			group := filepath.Join(b.disksDir(), "spare", g.Name())
			markers, _ := os.ReadDir(group)
			seedName, version := spareDiskGroup(g.Name())
			if version == diskLayoutVersion && seed.Claimable(stateDir(b.opts.StateDir).seedRoot(), seedName) {
				for _, m := range markers {
					keep[m.Name()] = true
				}
				continue
			}
			// No backend claims from this group: its disks were made by
			// an older version, or on a seed that is gone or superseded
			// (the base once the extra seed is complete, an older extra
			// seed). Removing a marker is the claim (claimSpareDisk), so
			// the disk is ours to remove.
			for _, m := range markers {
				if os.Remove(filepath.Join(group, m.Name())) == nil && sandboxid.Valid(m.Name()) {
					_ = disk.ByID(b.disksDir(), diskMounts, m.Name()).Remove()
				}
			}
			_ = os.Remove(group) // fails if a filler added a marker meanwhile
		}
	}
	disk.Prune(b.disksDir(), diskMounts, keep)
}

// spareDiskGroup splits the name of a spare disk group (spareDiskDir:
// <seed>-<bytes>-<inodes>-<layout version>) into the seed's directory
// name and the layout version; both are "" for a name of another shape.
func spareDiskGroup(name string) (seed, version string) {
	rest := name
	var fields [3]string
	for i := 2; i >= 0; i-- {
		j := strings.LastIndexByte(rest, '-')
		if j < 0 {
			return "", ""
		}
		rest, fields[i] = rest[:j], rest[j+1:]
	}
	for _, n := range fields[:2] {
		if _, err := strconv.ParseInt(n, 10, 64); err != nil {
			return "", ""
		}
	}
	return rest, fields[2]
}

// removeSpareDisks unmounts and deletes every spare disk of the state
// directory, of every group. Removing a marker is the claim, as in
// claimSpareDisk, so a disk another backend claimed meanwhile is left.
func (b *Backend) removeSpareDisks() error {
	root := filepath.Join(b.disksDir(), "spare")
	groups, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("local backend: list spare disks: %w", err)
	}
	var errs []error
	for _, g := range groups {
		group := filepath.Join(root, g.Name())
		markers, _ := os.ReadDir(group)
		for _, m := range markers {
			if os.Remove(filepath.Join(group, m.Name())) != nil || !sandboxid.Valid(m.Name()) {
				continue
			}
			if err := disk.ByID(b.disksDir(), diskMounts, m.Name()).Remove(); err != nil {
				errs = append(errs, fmt.Errorf("local backend: remove spare disk %s: %w", m.Name(), err))
			}
		}
		_ = os.Remove(group)
	}
	return errors.Join(errs...)
}
