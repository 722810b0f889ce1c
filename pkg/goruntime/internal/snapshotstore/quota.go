package snapshotstore

// The quota's counts: what the tars and trees being taken hold now, and
// what one owner's snapshots hold.

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// inFlightEvery is how many bytes a tar grows between two looks at what
// all tars being written hold together.
const inFlightEvery = 16 << 20

// writing is the disk the tars being written hold together (allocated
// blocks: a sparse file counts what it holds), and the trees being
// extracted (the bytes streamed into each, as it last recorded them).
func (s Store) writing() int64 {
	tars, _ := filepath.Glob(filepath.Join(s.tmp(), "*", "files.tar"))
	var sum int64
	for _, p := range tars {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			sum += st.Blocks * 512
		}
	}
	trees, _ := filepath.Glob(filepath.Join(s.tmp(), "*", "streamed"))
	for _, p := range trees {
		if data, err := os.ReadFile(p); err == nil {
			n, _ := strconv.ParseInt(string(data), 10, 64)
			sum += n
		}
	}
	return sum
}

// ownerUsed is what owner's snapshots hold, those kept for sandboxes
// layered on them included. The caller holds the lock and has pruned.
func (s Store) ownerUsed(owner string) int64 {
	entries, _ := os.ReadDir(s.ownerDir(owner))
	var used int64
	for _, e := range entries {
		if m, err := readMeta(filepath.Join(s.ownerDir(owner), e.Name(), "meta.json")); err == nil && m.Owner == owner {
			used += m.Bytes
		}
	}
	return used
}
