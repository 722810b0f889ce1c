package disk

// Disks nobody will remove. A disk is removed by its sandbox's Close, by
// New's prune of a dead sandbox, or (a spare) when it is claimed. Three
// kinds escape all three, and all are found by every New's prune:
//   - a spare disk of a group no backend claims from (of an older layout,
//     or of a seed that is gone or superseded): the spare pool's own
//     prune (local's sparedisk.go);
//   - a disk of a state directory that neither a live sandbox nor a spare
//     marker names (its Open or filler died midway): Prune;
//   - a disk whose image was deleted while it was mounted, as when a state
//     directory is removed with rm -rf (a test's temporary one) while its
//     spare disks were ready: its markers went with the directory, and the
//     deleted image keeps its blocks until the loop device is freed:
//     PruneOrphans, for every state directory at once.

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// pruneAge is how old an image nobody names must be before Prune removes
// it: a younger one may be in the middle of an Open, which touches the
// image when it claims a disk (Claim), or of a refill, in another process.
const pruneAge = 10 * time.Minute

// Prune removes the disks with images in images (mounted in mounts) that
// keep does not name by ID (the live sandboxes' disks and the claimable
// spares) and whose image is older than pruneAge.
func Prune(images, mounts string, keep map[string]bool) {
	entries, err := os.ReadDir(images)
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".img")
		if !ok || !sandboxid.Valid(id) || keep[id] {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < pruneAge {
			continue
		}
		_ = ByID(images, mounts, id).Remove()
	}
}

// PruneOrphans unmounts the disks in mounts whose image file was deleted
// while they were mounted (the loop device's backing file reads
// "... (deleted)") and removes their mount points. A running sandbox on
// such a disk keeps working: its own mount namespace holds its binds, and
// the lazy unmount only takes the host's view away.
func PruneOrphans(mounts string) {
	for _, mp := range orphanMounts("/proc/self/mountinfo", "/sys/block", mounts) {
		_ = Disk{Dir: mp}.Remove()
	}
}

// orphanMounts lists the mount points directly under mounts (from
// mountinfo) whose loop device's backing file (under sysBlock) was
// deleted.
func orphanMounts(mountinfo, sysBlock, mounts string) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil
	}
	defer f.Close()
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
		if filepath.Dir(mp) != mounts || !sandboxid.Valid(filepath.Base(mp)) || !isLoop || !strings.HasPrefix(loop, "loop") {
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
