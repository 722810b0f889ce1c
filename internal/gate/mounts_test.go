package gate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountsNamespace: as root, the gate's command runs in a mount
// namespace of its own in which the kept disk is mounted and the other
// disks are not, while the host keeps all of them; and a mount made on
// the host afterwards, or an unmount there, does not reach the
// namespace (its mounts are private, even under a shared parent).
func TestMountsNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a gate makes a mount namespace as root only (a user's gate has one from unshare(1))")
	}
	root := t.TempDir()
	// A shared parent, as / is on systemd hosts: without private mounts
	// the host's unmount below would reach the gate's copy.
	if err := unix.Mount("disks", root, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	if err := unix.Mount("", root, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	mount := func(name string) string {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("disk-"+filepath.Base(name), p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keep, keepCache := mount("mine"), mount("mine/cache")
	other, otherCache := mount("other"), mount("other/cache")

	// The command says it runs, then waits for the host to change its
	// own mounts, then shows its mount table.
	fifos := t.TempDir()
	running, changed := filepath.Join(fifos, "running"), filepath.Join(fifos, "changed")
	for _, f := range []string{running, changed} {
		if err := unix.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd, w, out := startGate(t, Plan{
		Mounts:  &Mounts{Keep: keep, Drop: []string{root}},
		Command: []string{"/bin/sh", "-c", `echo >"$0"; read _ <"$1"; cat /proc/self/mountinfo`, running, changed},
	})
	if _, err := w.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(running); err != nil {
		t.Fatal(err)
	}
	// The host lets go of the kept disk (as the backend does once the
	// sandbox answers) and mounts another.
	if err := unix.Unmount(keep, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	mount("late")
	if err := os.WriteFile(changed, []byte("\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gate: %v: %s", err, out)
	}
	table := filepath.Join(fifos, "mountinfo")
	if err := os.WriteFile(table, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	seen, err := mountPoints(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keep, keepCache} {
		if !slices.Contains(seen, p) {
			t.Errorf("the sandbox's own disk %s is not mounted in its namespace after the host unmounted it:\n%s", p, out)
		}
	}
	for _, p := range []string{other, otherCache, filepath.Join(root, "late")} {
		if slices.Contains(seen, p) {
			t.Errorf("another disk %s is mounted in the sandbox's namespace:\n%s", p, out)
		}
	}
	host, err := mountPoints("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, otherCache} {
		if !slices.Contains(host, p) {
			t.Errorf("the gate unmounted %s on the host", p)
		}
	}
	if slices.Contains(host, keepCache) {
		t.Errorf("the host still has %s", keepCache)
	}
}

// TestDropped: which mount points a gate detaches, parents first.
func TestDropped(t *testing.T) {
	points := []string{"/", "/run", "/run/d/b/cache", "/run/d/a", "/run/d/a/cache", "/run/d/b", "/run/d", "/run/dx/c", "/img/template-1/mnt"}
	got := dropped(points, Mounts{Keep: "/run/d/a", Drop: []string{"/run/d", "/img"}})
	want := []string{"/run/d/b", "/run/d/b/cache", "/img/template-1/mnt"}
	if !slices.Equal(got, want) {
		t.Errorf("dropped = %q, want %q", got, want)
	}
}

// TestMountPointsUnescaped: the kernel's octal escapes in a mount table
// are undone.
func TestMountPointsUnescaped(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/tab\011x`: "/tab\tx",
		`/back\134`: `/back\`,
		`/plain`:    "/plain",
		`/short\04`: `/short\04`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
	if !strings.HasPrefix(unescapeOctal(`\101`), "A") {
		t.Error("unescapeOctal(\\101) is not A")
	}
}
