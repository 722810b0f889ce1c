package local_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// sandboxMeta is the part of a sandbox's sandbox.json these tests read.
type sandboxMeta struct {
	PID     int `json:"pid"`
	HostUID int `json:"host_uid"`
	Cgroup  struct {
		Memory, Pids, CPU string
	} `json:"cgroup"`
	Disk *struct {
		Image    string `json:"image"`
		Dir      string `json:"dir"`
		LeftHost bool   `json:"left_host"`
	} `json:"disk"`
}

// openRaw opens a sandbox of b, closed when the test ends, and reads its
// sandbox.json.
func openRaw(t *testing.T, b *local.Backend) (*local.Sandbox, sandboxMeta) {
	t.Helper()
	sb, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	s := sb.(*local.Sandbox)
	return s, readMeta(t, s)
}

// readMeta reads s's sandbox.json.
func readMeta(t *testing.T, s *local.Sandbox) sandboxMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.Dir(), "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m sandboxMeta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func randomID(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// sleeper starts a process that lives until the test ends, as uid when
// uid > 0.
func sleeper(t *testing.T, uid int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if uid > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestPruneLeftoverCgroups: an empty cgroup of a sandbox that no longer
// exists (no directory in the state directory), older than 10 minutes, is
// removed from every hierarchy by the next New's prune. A live sandbox's
// cgroup, an old one with a task in it (a sandbox of another state
// directory), a young empty one (another backend's Open in progress) and
// an old empty one named by a sandbox directory here all stay.
func TestPruneLeftoverCgroups(t *testing.T) {
	opts := testOptions()
	b := newBackend(t, opts)
	sb, m := openRaw(t, b)
	var groups []string
	for _, d := range []string{m.Cgroup.Memory, m.Cgroup.Pids, m.Cgroup.CPU} {
		if d != "" && (len(groups) == 0 || groups[len(groups)-1] != filepath.Dir(d)) {
			groups = append(groups, filepath.Dir(d))
		}
	}
	old := time.Now().Add(-time.Hour)
	mk := func(id string, aged bool) {
		for _, g := range groups {
			dir := filepath.Join(g, id)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// The kernel frees a group shortly after its last task exits.
				for i := 0; i < 100 && syscall.Rmdir(dir) == syscall.EBUSY; i++ {
					time.Sleep(10 * time.Millisecond)
				}
			})
			if aged {
				if err := os.Chtimes(dir, old, old); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	dead, young, busy, named := randomID(t), randomID(t), randomID(t), randomID(t)
	mk(dead, true)
	mk(young, false)
	mk(busy, true)
	mk(named, true)
	p := sleeper(t, 0)
	for _, g := range groups {
		if err := os.WriteFile(filepath.Join(g, busy, "cgroup.procs"), []byte(strconv.Itoa(p.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	namedDir := filepath.Join(b.StateDir(), "sandboxes", named)
	if err := os.Mkdir(namedDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(namedDir) })

	pruneNow(t, opts)

	for _, g := range groups {
		if _, err := os.Stat(filepath.Join(g, dead)); !os.IsNotExist(err) {
			t.Errorf("empty old cgroup of a gone sandbox %s: still there (%v)", filepath.Join(g, dead), err)
		}
		for what, id := range map[string]string{"young": young, "with a task": busy, "named by a sandbox directory": named, "of the live sandbox": sb.ID()} {
			if _, err := os.Stat(filepath.Join(g, id)); err != nil {
				t.Errorf("cgroup %s (%s): removed by the prune: %v", filepath.Join(g, id), what, err)
			}
		}
	}
	if _, err := sb.Exec(context.Background(), goruntime.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("the live sandbox after the prune: %v", err)
	}
	_ = p.Process.Kill()
}

// TestPruneStaleLeases: a host uid lease whose sandbox directory is gone
// and whose uid no process runs as is removed by the next New's prune. A
// lease whose directory is gone but whose uid a process still runs as, a
// lease whose directory exists, and a live sandbox's lease stay.
func TestPruneStaleLeases(t *testing.T) {
	const uids = "/run/go-runtime-sandbox/uids"
	if os.Geteuid() != 0 {
		t.Skip("uid leases are made only as root")
	}
	opts := testOptions()
	b := newBackend(t, opts)
	_, m := openRaw(t, b)
	if m.HostUID <= 0 {
		t.Skip("sandboxes run as the caller's uid here (Relax hostuid)")
	}
	// Outside the default range, so no allocation meets them.
	const dead, busy, present = 1_949_999_101, 1_949_999_102, 1_949_999_103
	gone := filepath.Join(t.TempDir(), "sandboxes", "0123456789abcdef")
	write := func(uid int, dir string) string {
		p := filepath.Join(uids, strconv.Itoa(uid))
		data, _ := json.Marshal(map[string]any{"dir": dir, "created": time.Now().Add(-time.Hour).UTC()})
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(p) })
		return p
	}
	deadLease := write(dead, gone)
	busyLease := write(busy, gone)
	presentLease := write(present, t.TempDir())
	sleeper(t, busy)

	pruneNow(t, opts)

	if _, err := os.Stat(deadLease); !os.IsNotExist(err) {
		t.Errorf("lease of a gone sandbox whose uid nothing runs as: still there (%v)", err)
	}
	for what, p := range map[string]string{
		"directory gone, uid still running": busyLease,
		"directory present":                 presentLease,
		"the live sandbox's":                filepath.Join(uids, strconv.Itoa(m.HostUID)),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("lease %s (%s): removed by the prune: %v", p, what, err)
		}
	}
}

// TestPruneUnclaimableSpares: spare disks (StateDir/disks/spare/<seed>-
// <bytes>-<inodes>-<layout>/) and spare build caches (StateDir/spare/
// <seed>/) of a seed no backend claims from any more (here an older kind
// of extra seed) are removed by the next New's prune: the marker, the
// mounted disk and its image, the cache. The spares of the current seed
// stay, mounted.
//
// The test makes all it needs, so it holds on an empty state directory:
// it builds the extra seed first (PrepareExtra; on a fresh machine the
// backend would otherwise finish it in the background halfway through,
// and the current seed would change under the test), waits for the
// backend to fill the spare disks, and makes the build caches itself (the
// backend fills spare caches only for sandboxes without a disk of their
// own, Relax.DiskQuota).
func TestPruneUnclaimableSpares(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	opts.DiskInodes = 200_003 // a spare group of this test's own
	b, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	if err := b.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.PrepareExtra(ctx); err != nil {
		t.Fatal(err)
	}
	// Another backend's hold on the state directory (a shared flock on
	// users.lock, as New takes it), so that b's Close keeps the spare
	// disks, as it does while any other backend uses the directory.
	hold, err := os.OpenFile(filepath.Join(b.StateDir(), "users.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := syscall.Flock(int(hold.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	sb, err := b.Open(ctx) // claims a disk; the pool refills to two behind it
	if err != nil {
		t.Fatal(err)
	}
	suffix := "-" + strconv.FormatInt(local.DefaultDiskBytes, 10) + "-200003-l2"
	var current string
	var markers []os.DirEntry
	for deadline := time.Now().Add(2 * time.Minute); len(markers) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the spare disk pool did not refill to two within two minutes")
		}
		// The extra seed's group: the one Open claims from once the
		// extra seed is complete. The base seed's group may be there
		// too, filled when the base seed completed, and is superseded.
		groups, _ := filepath.Glob(filepath.Join(b.StateDir(), "disks", "spare", "*-extra-*"+suffix))
		if len(groups) == 1 {
			current = groups[0]
			markers, _ = os.ReadDir(current)
		}
	}
	_ = sb.Close(ctx)
	if err := b.Close(ctx); err != nil { // waits for the refill
		t.Fatal(err)
	}
	kept, moved := markers[0].Name(), markers[1].Name()
	seed := strings.TrimSuffix(filepath.Base(current), suffix)
	key, _, _ := strings.Cut(seed, "-extra-")
	stale := filepath.Join(filepath.Dir(current), key+"-extra-v0-test"+suffix)
	t.Cleanup(func() {
		// Leave no disk behind: a spare whose marker and image are
		// deleted is pruned as an orphan.
		for _, m := range []string{filepath.Join(current, kept), filepath.Join(stale, moved)} {
			if os.Remove(m) == nil {
				_ = os.Remove(filepath.Join(b.StateDir(), "disks", filepath.Base(m)+".img"))
			}
		}
		_ = os.Remove(stale)
		_ = os.Remove(current) // this test's own group, empty now
		pruneNow(t, testOptions())
	})
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(current, moved), filepath.Join(stale, moved)); err != nil {
		t.Fatal(err)
	}
	// A spare build cache is a directory of cache files (00/x-a ...)
	// named by a random ID under spare/<seed>/; what it holds does not
	// matter to the prune.
	spareCache := func(seed string) string {
		dir := filepath.Join(b.StateDir(), "spare", seed, randomID(t))
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.MkdirAll(filepath.Join(dir, "00"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00", "x-a"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	staleCache := spareCache(key + "-extra-v0-test")
	currentCache := spareCache(seed)

	pruneNow(t, opts)

	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("spare disk group of a superseded seed %s: still there (%v)", stale, err)
	}
	if mounted(diskMount(moved)) {
		t.Errorf("spare disk %s of a superseded seed: still mounted", moved)
	}
	for _, p := range []string{diskMount(moved), filepath.Join(b.StateDir(), "disks", moved+".img")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("spare disk of a superseded seed: %s still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(staleCache)); !os.IsNotExist(err) {
		t.Errorf("spare build caches of a superseded seed %s: still there (%v)", filepath.Dir(staleCache), err)
	}
	if _, err := os.Stat(filepath.Join(current, kept)); err != nil || !mounted(diskMount(kept)) {
		t.Errorf("spare disk %s of the current seed: marker %v, mounted %v; want both kept", kept, err, mounted(diskMount(kept)))
	}
	// A prune that took the current seed for superseded would have
	// trashed currentCache and removed its group. Another process may
	// claim currentCache meanwhile (a backend of this state directory
	// without disks), which leaves the group: so the group is what counts.
	if _, err := os.Stat(filepath.Dir(currentCache)); err != nil {
		t.Errorf("spare build caches of the current seed: %v", err)
	}
}
