package gate

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A root sandbox's disk lives in a mount namespace of the sandbox's own,
// never in the host's. The backend mounts the disk on the host and lays
// it out; the gate then makes a mount namespace for its thread (a copy of
// the host's, the disk included), makes every mount in it private, so
// that nothing done on either side reaches the other, and detaches the
// copies of disks that are not its own; once the sandbox answers, the
// backend unmounts the disk from the host and reaches it through
// /proc/<pid>/root.
//
// Why: every mount namespace made copies every mount of the namespace it
// is made from, and bubblewrap reads the whole mount table after each of
// its binds and detaches the old root; with two mounts per live sandbox
// in the host's namespace, a start with 1,000 live took 250 ms instead of
// 35 (docs/benchmarks.md, "Scale"). With the disks out of the host's
// namespace it holds the same few mounts however many sandboxes live.

// Mounts is the mount namespace a gate makes for a sandbox whose disk was
// mounted on the host (Plan.Mounts).
type Mounts struct {
	// Keep is the sandbox's disk: the mount on it, and those below it,
	// stay.
	Keep string `json:"keep"`
	// Drop are directories where every mount but Keep's is detached:
	// the mount points of the other sandboxes' disks, the images'
	// directory (a disk template being made).
	Drop []string `json:"drop,omitempty"`
}

// validate refuses relative paths, which /proc's mount table never
// holds.
func (m Mounts) validate() error {
	for _, p := range append([]string{m.Keep}, m.Drop...) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("gate plan: mount namespace path %q must be absolute", p)
		}
	}
	return nil
}

// makeMounts moves this thread into a new mount namespace, makes its
// mounts private and detaches those m drops. The caller must have locked
// the thread and must exec on it: the namespace is the thread's (unshare
// gives it a file system context of its own), and execve keeps it.
func makeMounts(m Mounts) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("make the sandbox's mount namespace: %w", err)
	}
	// Before the backend unmounts the disk on the host: a shared mount
	// (systemd makes / shared) would pass that unmount on to this copy.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the sandbox's mounts private: %w", err)
	}
	// /proc/self would show the thread group leader's namespace, not this
	// thread's.
	points, err := mountPoints("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	for _, p := range dropped(points, m) {
		// Parents come first, and take the mounts below them along: a
		// mount point gone already is no error.
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("detach %s from the sandbox's mount namespace: %w", p, err)
		}
	}
	return nil
}

// dropped are the mount points of points that m detaches, parents before
// the mounts below them.
func dropped(points []string, m Mounts) []string {
	var out []string
	for _, p := range points {
		if within(p, m.Keep) {
			continue
		}
		if slices.ContainsFunc(m.Drop, func(d string) bool { return p != d && within(p, d) }) {
			out = append(out, p)
		}
	}
	// By length, so parents come first; then by name, so that a mount
	// point listed twice (mounts stacked on it) is detached once.
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(a)-len(b), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// within reports whether path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// mountPoints reads the mount points of a mount table (the format of
// /proc/<pid>/mountinfo), unescaped.
func mountPoints(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 {
			out = append(out, unescapeOctal(fields[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the sandbox's mount table: %w", err)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's escaping of a path in a mount table
// (space, tab, newline and backslash as \ooo).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
