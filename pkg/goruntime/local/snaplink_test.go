package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestSnapshotCacheParentLink: a sandbox moves HOME/.cache (the build
// cache's mount point stays mounted in it) aside and puts a symlink to a
// host directory in its place. Root reads the snapshot's tree and layers
// disks over it (snapcow.go): neither may follow that link into the
// host's tree. The code that did mounted the layered build cache's
// overlay, with the sandbox's upper directory, over the host's
// <dir>/go-build (left mounted after the sandbox closed), and a restore
// from the snapshot read the host's files there into the sandbox.
func TestSnapshotCacheParentLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("layered snapshots need root")
	}
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "go-build", "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "go-build", "ab", "secret-d"), []byte("HOSTSECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what the code that followed the link left
		for range 4 {
			_ = unix.Unmount(filepath.Join(host, "go-build"), unix.MNT_DETACH)
		}
	})
	ctx, b, orig := newLayeredRig(t, -1)
	// No cache file of its own, so that the take lists none through the
	// link. HOME/.cache a link to the host's directory, then GOCACHE one to
	// its go-build.
	for _, plant := range []string{
		`rm -f .cache/go-build/trim.txt && mv .cache .c2 && ln -s ` + host + ` .cache`,
		`rm .cache && mkdir .cache && ln -s ` + host + `/go-build .cache/go-build`,
	} {
		if out, err := snapRun(ctx, orig, `cd "$HOME" && `+plant+` && echo x >/app/x`); err != nil {
			t.Fatalf("plant the link: %v: %s", err, out)
		}
		snap, err := b.Snapshot(ctx, snapOwner, orig, goruntime.SnapshotSpec{TTL: time.Hour})
		if err != nil {
			t.Logf("%s: snapshot refused: %v", plant, err)
			continue
		}
		checkNoHostLink(ctx, t, b, snap.ID, host)
	}
}

// checkNoHostLink fails if opening or restoring from snapshot id, whose
// tree holds a link to the host's directory host, mounted over host or
// read its files.
func checkNoHostLink(ctx context.Context, t *testing.T, b *local.Backend, id, host string) {
	t.Helper()
	mounted := func() bool {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(data), " "+host)
	}
	if sb, err := b.OpenSnapshot(ctx, snapOwner, id); err == nil {
		if mounted() {
			t.Errorf("opening the snapshot mounted over the host's %s/go-build", host)
		}
		_ = sb.Close(ctx)
	}
	if mounted() {
		t.Errorf("the sandbox opened from the snapshot closed, a mount over the host's %s/go-build stays", host)
	}
	other, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	_ = b.Restore(ctx, snapOwner, other, id)
	if out, _ := snapRun(ctx, other, `find / -xdev -name 'secret-d*' -exec cat {} + 2>/dev/null; find "$HOME" /app -name 'secret-d*' -exec cat {} +`); strings.Contains(out, "HOSTSECRET") {
		t.Errorf("a restore from the snapshot read the host's %s/go-build/ab/secret-d into the sandbox: %q", host, out)
	}
}
