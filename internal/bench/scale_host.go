package bench

// What the scale section reads of the host: what closed sandboxes left,
// a sandbox's memory cgroup, MemAvailable.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
)

// waitNoLeaks waits up to scaleLeakWait for the host to hold nothing of
// the closed sandboxes recs (the warm pool's and the spares aside), and
// returns what it still holds and how long it waited.
func waitNoLeaks(state string, recs []hostleaks.Sandbox) ([]string, time.Duration) {
	start := time.Now()
	for {
		leaks := closedLeaks(state, recs)
		if len(leaks) == 0 || time.Since(start) > scaleLeakWait {
			return leaks, time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// closedLeaks is hostleaks.Find for the closed sandboxes recs, leaving
// out what the live warm pool's sandboxes hold (their directories exist).
func closedLeaks(state string, recs []hostleaks.Sandbox) []string {
	var out []string
	for _, l := range hostleaks.Find(state, recs, true) {
		if !pooled(state, l) {
			out = append(out, l)
		}
	}
	return out
}

// pooled reports whether a leak line names a sandbox that is live in the
// warm pool: its sandbox.json exists and names the disk or the directory
// the line mentions.
func pooled(state string, line string) bool {
	entries, _ := os.ReadDir(filepath.Join(state, "sandboxes"))
	for _, e := range entries {
		dir := filepath.Join(state, "sandboxes", e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
		if err != nil {
			continue
		}
		var m struct {
			Disk *struct {
				Image string `json:"image"`
				Dir   string `json:"dir"`
			} `json:"disk"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if strings.Contains(line, dir) || (m.Disk != nil && (strings.Contains(line, m.Disk.Image) || strings.Contains(line, m.Disk.Dir+" ") || strings.Contains(line, m.Disk.Dir+"/"))) {
			return true
		}
	}
	return false
}

// memoryCgroup reads a sandbox's memory cgroup directory from its
// sandbox.json.
func memoryCgroup(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		return "", err
	}
	var m struct {
		Cgroup struct {
			Memory string `json:"memory"`
		} `json:"cgroup"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("sandbox.json of %s: %w", dir, err)
	}
	return m.Cgroup.Memory, nil
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}

// readInt reads a file holding one integer; 0 when it cannot.
func readInt(p string) int64 {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
