package local

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// Disks nobody will remove. A disk is removed by its sandbox's Close, by
// New's prune of a dead sandbox, or (a spare) when it is claimed. Three
// kinds escape all three, and all are found here by every New's prune:
//   - a spare disk of a group no backend claims from (spareDiskDir names
//     it by seed, size, inodes and layout): of an older layout, or of a
//     seed that is gone or superseded (claimableSeed): pruneDisks;
//   - a disk of this state directory that neither a live sandbox nor a
//     spare marker names (its Open or filler died midway): pruneDisks;
//   - a disk whose image was deleted while it was mounted, as when a state
//     directory is removed with rm -rf (a test's temporary one) while its
//     spare disks were ready: its markers went with the directory, and the
//     deleted image keeps its blocks until the loop device is freed:
//     pruneOrphanDisks, for every state directory at once.

// pruneDisks removes disks of this state directory no sandbox and no
// spare marker names and whose image is older than 10 minutes (a younger
// one may be in the middle of an Open, which touches the image when it
// claims a disk, or of a refill, in another process). live holds the
// mount points (disk.Dir) of live sandboxes' disks.
func (b *Backend) pruneDisks(live map[string]bool) {
	entries, err := os.ReadDir(b.disksDir())
	if err != nil {
		return
	}
	spare := map[string]bool{}
	if groups, err := os.ReadDir(filepath.Join(b.disksDir(), "spare")); err == nil {
		for _, g := range groups {
			group := filepath.Join(b.disksDir(), "spare", g.Name())
			markers, _ := os.ReadDir(group)
			seed, layout := spareDiskGroup(g.Name())
			if layout == diskLayout && b.claimableSeed(seed) {
				for _, m := range markers {
					spare[m.Name()] = true
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
					_ = diskByID(b.disksDir(), m.Name()).remove()
				}
			}
			_ = os.Remove(group) // fails if a filler added a marker meanwhile
		}
	}
	for _, e := range entries {
		id := strings.TrimSuffix(e.Name(), ".img")
		d := diskByID(b.disksDir(), id)
		if !sandboxid.Valid(id) || spare[id] || live[d.Dir] {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < 10*time.Minute {
			continue
		}
		_ = d.remove()
	}
}

// pruneOrphanDisks unmounts the disks under runRoot/disks whose image file
// was deleted while they were mounted (the loop device's backing file
// reads "... (deleted)") and removes their mount points. A running
// sandbox on such a disk keeps working: its own mount namespace holds its
// binds, and the lazy unmount only takes the host's view away.
func pruneOrphanDisks() {
	for _, mp := range orphanDiskMounts("/proc/self/mountinfo", "/sys/block") {
		_ = disk{Dir: mp}.remove()
	}
}

// orphanDiskMounts lists the mount points directly under runRoot/disks
// (from mountinfo) whose loop device's backing file (under sysBlock) was
// deleted.
func orphanDiskMounts(mountinfo, sysBlock string) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil
	}
	defer f.Close()
	parent := filepath.Join(runRoot, "disks")
	var orphans []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 2 {
			continue
		}
		// Our mount points need no unescaping: a fixed parent and a hex id.
		mp, source := fields[4], after[1]
		loop, isLoop := strings.CutPrefix(source, "/dev/")
		if filepath.Dir(mp) != parent || !sandboxid.Valid(filepath.Base(mp)) || !isLoop || !strings.HasPrefix(loop, "loop") {
			continue
		}
		backing, err := os.ReadFile(filepath.Join(sysBlock, loop, "loop", "backing_file"))
		if err != nil {
			continue
		}
		if strings.HasSuffix(strings.TrimSpace(string(backing)), " (deleted)") {
			orphans = append(orphans, mp)
		}
	}
	return orphans
}

// spareDiskGroup splits the name of a spare disk group (spareDiskDir:
// <seed>-<bytes>-<inodes>-<layout>) into the seed's directory name and the
// layout; both are "" for a name of another shape.
func spareDiskGroup(name string) (seed, layout string) {
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

// claimableSeed reports whether spares linked from the seed directory
// named name (under StateDir/seed) are still claimed: it is complete, and
// it is what withExtra picks for its base seed (the current extra seed
// once that is complete, else the base).
func (b *Backend) claimableSeed(name string) bool {
	if name == "" || name != filepath.Base(name) {
		return false
	}
	sd := stateDir(b.opts.StateDir)
	if _, err := os.Stat(filepath.Join(sd.seed(name), ".complete")); err != nil {
		return false
	}
	base := strings.TrimSuffix(name, extraSeedSuffix())
	if base != name {
		return true // the current kind of extra seed, complete
	}
	if strings.Contains(name, "-extra-") {
		return false // an extra seed of an older kind
	}
	return withExtra(sd.seed(name)) == sd.seed(name)
}
