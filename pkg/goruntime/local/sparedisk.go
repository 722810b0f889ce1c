package local

// Sandbox disks (internal/disk) as the backend uses them: what a disk
// holds (diskLayout), the pool of ready disks Open claims from, and the
// prune of disks nobody will claim.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// diskStore is the state directory's sandbox disks as the backend makes
// them (of Options.DiskBytes and DiskInodes), the spares Open claims from
// and the prune of those nobody will claim.
type diskStore struct {
	dir           string // StateDir/disks: the images and the spare markers
	seedRoot      string // the seeds, whose disks are claimable (seed.Claimable)
	bytes, inodes int64
	// maxLoops caps the host's attached loop devices for new disks
	// (disk.Spec.MaxLoops); 0: the kernel's limit alone. Tests set it.
	maxLoops int
	logger   *slog.Logger
	spares   *spares.Keyed[string, disk.Disk] // ready disks, per seed
}

func newDiskStore(o Options) *diskStore {
	d := &diskStore{dir: stateDir(o.StateDir).disks(), seedRoot: stateDir(o.StateDir).seedRoot(), bytes: o.DiskBytes, inodes: o.DiskInodes, logger: o.Logger}
	d.spares = d.newSpares()
	return d
}

// spec is how the backend makes a disk linked to seed.
func (d *diskStore) spec(seed string) disk.Spec {
	return disk.Spec{Images: d.dir, Mounts: diskMounts, Bytes: d.bytes, Inodes: d.inodes, Seed: seed, Layout: diskLayout(), MaxLoops: d.maxLoops}
}

// spareDir holds one marker file per ready disk made for this seed,
// size and inode count; the marker's name is the disk's id.
func (d *diskStore) spareDir(seed string) string {
	return filepath.Join(d.dir, "spare", fmt.Sprintf("%s-%d-%d-%s", filepath.Base(seed), d.bytes, d.inodes, diskLayoutVersion))
}

// claim takes a ready disk from the spare pool, or makes one, and
// gives its directories to uid (0: leave them to root).
func (d *diskStore) claim(ctx context.Context, seed string, uid int) (disk.Disk, error) {
	dk, ok := d.claimSpare(seed)
	if !ok {
		var err error
		if dk, err = disk.Make(ctx, sandboxid.New(), d.spec(seed)); err != nil {
			return dk, err
		}
	}
	if err := dk.Claim(diskLayout(), uid); err != nil {
		dk.Remove()
		return dk, err
	}
	return dk, nil
}

// claimSpare takes a ready disk: removing its marker is the claim
// (only one remover succeeds), then the disk must still be mounted (a
// reboot unmounts spares but leaves their markers).
func (d *diskStore) claimSpare(seed string) (disk.Disk, bool) {
	dir := d.spareDir(seed)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return disk.Disk{}, false
	}
	for _, e := range entries {
		if !sandboxid.Valid(e.Name()) || os.Remove(filepath.Join(dir, e.Name())) != nil {
			continue
		}
		dk := disk.ByID(d.dir, diskMounts, e.Name())
		if dk.Complete(diskLayout()) {
			return dk, true
		}
		d.logger.Warn("local backend: a spare disk is not mounted or not laid out; removing it", "disk", dk.Dir)
		dk.Remove()
	}
	return disk.Disk{}, false
}

// newSpares is the spare disks, a pool per seed (package
// spares): each fills a directory of markers, one per ready disk, that
// any process of the state directory may claim (claimSpare), one disk
// at a time.
func (d *diskStore) newSpares() *spares.Keyed[string, disk.Disk] {
	return spares.NewKeyed(func(seed string) *spares.Pool[disk.Disk] {
		return spares.New(sharedSpares(spares.Config[disk.Disk]{
			Make: func(ctx context.Context) (disk.Disk, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				return disk.Make(ctx, sandboxid.New(), d.spec(seed))
			},
			Shared:  spareDiskShelf(d.spareDir(seed)),
			Discard: disk.Disk.Remove,
		}, d.logger, "make spare disk"))
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

// refill tops the ready disks made for seed up to spareDisksKept.
func (d *diskStore) refill(seed string) { d.spares.Fill(seed, spareDisksKept) }

// prune removes the spare disks no backend claims (their group is of
// an older layout, or of a seed that is gone or superseded), then, with
// disk.Prune, the disks of this state directory that no sandbox and no
// spare marker names. live holds the IDs of live sandboxes' disks.
func (d *diskStore) prune(live map[string]bool) {
	keep := map[string]bool{}
	for id := range live {
		keep[id] = true
	}
	if groups, err := os.ReadDir(filepath.Join(d.dir, "spare")); err == nil {
		for _, g := range groups {
			group := filepath.Join(d.dir, "spare", g.Name())
			markers, _ := os.ReadDir(group)
			seedName, version := spareDiskGroup(g.Name())
			if version == diskLayoutVersion && seed.Claimable(d.seedRoot, seedName) {
				for _, m := range markers {
					keep[m.Name()] = true
				}
				continue
			}
			// No backend claims from this group: its disks were made by
			// an older version, or on a seed that is gone or superseded
			// (the base once the extra seed is complete, an older extra
			// seed). Removing a marker is the claim (claimSpare), so
			// the disk is ours to remove.
			for _, m := range markers {
				if os.Remove(filepath.Join(group, m.Name())) == nil && sandboxid.Valid(m.Name()) {
					_ = disk.ByID(d.dir, diskMounts, m.Name()).Remove()
				}
			}
			_ = os.Remove(group) // fails if a filler added a marker meanwhile
		}
	}
	disk.Prune(d.dir, diskMounts, keep)
}

// spareDiskGroup splits the name of a spare disk group (spareDir:
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

// removeSpares unmounts and deletes every spare disk of the state
// directory, of every group. Removing a marker is the claim, as in
// claimSpare, so a disk another backend claimed meanwhile is left.
func (d *diskStore) removeSpares() error {
	root := filepath.Join(d.dir, "spare")
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
			if err := disk.ByID(d.dir, diskMounts, m.Name()).Remove(); err != nil {
				errs = append(errs, fmt.Errorf("local backend: remove spare disk %s: %w", m.Name(), err))
			}
		}
		_ = os.Remove(group)
	}
	return errors.Join(errs...)
}
