// Package hostleaks finds what the host still holds for a local backend's
// state directory, from the kernel's own tables rather than from the
// backend's bookkeeping: mounts, loop devices, cgroups, host uid leases,
// processes and sandbox directories. Tests and the scale benchmark use it
// to show that closing sandboxes (or sandbox-check --cleanup) left
// nothing behind; it shares no code with the backend that made them, so a
// bookkeeping bug there cannot hide a leak here.
package hostleaks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// Where the backend keeps host-wide state (pkg/goruntime/local's runRoot):
// written here again on purpose, as a reader of the host.
const (
	leasesDir = "/run/go-runtime-sandbox/uids"
	cgroupFS  = "/sys/fs/cgroup"
)

// Sandbox is what Find needs to know of one sandbox, recorded (Record)
// while it ran: its ID (its cgroups are named by it) and its processes.
type Sandbox struct {
	ID        string `json:"id"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Server    int    `json:"server_pid"`
	ServerAt  uint64 `json:"server_start"`
}

// Record reads a running sandbox's record from its directory's
// sandbox.json (local.Sandbox.Dir).
func Record(dir string) (Sandbox, error) {
	var s Sandbox
	data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		return s, fmt.Errorf("record sandbox: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("record sandbox %s: %w", dir, err)
	}
	return s, nil
}

// Find lists what the host holds for stateDir: each entry says what and
// where. sandboxes are those opened there. Spare disks and spare build
// caches are reported too unless spares is set.
func Find(stateDir string, sandboxes []Sandbox, spares bool) []string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return []string{fmt.Sprintf("state directory %s: %v", stateDir, err)}
	}
	var out []string
	out = append(out, mounts("/proc/self/mountinfo", "/sys/block", abs, spares)...)
	out = append(out, loops("/sys/block", filepath.Join(abs, "disks"), spares)...)
	var ids []string
	for _, s := range sandboxes {
		ids = append(ids, s.ID)
		for _, p := range []struct {
			pid   int
			start uint64
		}{{s.PID, s.StartTime}, {s.Server, s.ServerAt}} {
			if procfs.Alive(p.pid, p.start) {
				out = append(out, fmt.Sprintf("process %d of sandbox %s", p.pid, s.ID))
			}
		}
	}
	out = append(out, cgroups(cgroupFS, ids)...)
	out = append(out, leases(leasesDir, abs)...)
	if entries, err := os.ReadDir(filepath.Join(abs, "sandboxes")); err == nil {
		for _, e := range entries {
			out = append(out, "sandbox directory "+filepath.Join(abs, "sandboxes", e.Name()))
		}
	}
	if !spares {
		for _, d := range []string{"spare", "disks/spare"} {
			groups, _ := os.ReadDir(filepath.Join(abs, d))
			for _, g := range groups {
				entries, _ := os.ReadDir(filepath.Join(abs, d, g.Name()))
				for _, e := range entries {
					out = append(out, "spare "+filepath.Join(abs, d, g.Name(), e.Name()))
				}
			}
		}
	}
	return out
}

// spareIDs are the disk IDs the state directory's spare markers name.
func spareIDs(disks string) map[string]bool {
	ids := map[string]bool{}
	groups, _ := os.ReadDir(filepath.Join(disks, "spare"))
	for _, g := range groups {
		entries, _ := os.ReadDir(filepath.Join(disks, "spare", g.Name()))
		for _, e := range entries {
			ids[e.Name()] = true
		}
	}
	return ids
}

// isSpare reports whether a loop device's backing file is a spare disk's
// image (disks/<id>.img with a marker).
func isSpare(backing string, spare map[string]bool) bool {
	id, ok := strings.CutSuffix(filepath.Base(backing), ".img")
	return ok && spare[id]
}

// mounts lists the mounts that mention stateDir (an overlay's lowerdir on
// its seed, a bind) or whose loop device is backed by a file in it.
func mounts(mountinfo, sysBlock, stateDir string, spares bool) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return []string{"mountinfo: " + err.Error()}
	}
	defer f.Close()
	spare := map[string]bool{}
	if spares {
		spare = spareIDs(filepath.Join(stateDir, "disks"))
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, _ := strings.Cut(line, " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(after) < 2 {
			continue
		}
		mp, source := fields[4], after[1]
		if dev, ok := strings.CutPrefix(source, "/dev/loop"); ok {
			data, err := os.ReadFile(filepath.Join(sysBlock, "loop"+dev, "loop", "backing_file"))
			backing := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
			if err == nil && strings.HasPrefix(backing, stateDir+"/") {
				if !isSpare(backing, spare) {
					out = append(out, fmt.Sprintf("mount %s of %s (%s)", mp, source, backing))
				}
				continue
			}
		}
		if strings.Contains(line, stateDir+"/") {
			if spares && strings.HasPrefix(mp, "/run/go-runtime-sandbox/disks/") && spare[strings.Split(strings.TrimPrefix(mp, "/run/go-runtime-sandbox/disks/"), "/")[0]] {
				continue
			}
			out = append(out, "mount "+mp+" ("+strings.Join(after, " ")+")")
		}
	}
	return out
}

// loops lists the loop devices backed by a file in disks.
func loops(sysBlock, disks string, spares bool) []string {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil
	}
	spare := map[string]bool{}
	if spares {
		spare = spareIDs(disks)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), "loop", "backing_file"))
		if err != nil {
			continue
		}
		backing := strings.TrimSpace(string(data))
		if strings.HasPrefix(backing, disks+"/") && !isSpare(strings.TrimSuffix(backing, " (deleted)"), spare) {
			out = append(out, fmt.Sprintf("loop device /dev/%s backed by %s", e.Name(), backing))
		}
	}
	return out
}

// cgroups lists the cgroup directories anywhere under root named by one
// of ids.
func cgroups(root string, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if want[d.Name()] {
			out = append(out, "cgroup "+p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// leases lists the uid lease files naming a directory in stateDir.
func leases(dir, stateDir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var l struct {
			Dir string `json:"dir"`
		}
		if json.Unmarshal(data, &l) == nil && strings.HasPrefix(l.Dir, stateDir+"/") {
			out = append(out, fmt.Sprintf("uid lease %s for %s", filepath.Join(dir, e.Name()), l.Dir))
		}
	}
	return out
}
