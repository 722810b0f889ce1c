// Package localtest is for tests that run the local backend (the backend's
// own, the corpus, cmd/demo's and cmd/mcp-server's). As a user other than
// root they relax the protections that user cannot have on this host (the
// disk quota, where the kernel lets no user mount a tmpfs in its own
// namespaces: docs/local-backend.md, "Without root"), say so in the test
// log, and run the rest. Tests of root's ext4 disk images skip as a user
// (RequireDiskImage). Where nothing is missing, nothing is relaxed: a
// missing protection fails the tests with its fix.
package localtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

var (
	once   sync.Once
	noDisk bool // a user other than root, and the disk quota unavailable here
)

// diskUnavailable reports, once per process, whether the caller is not
// root and local.Check finds the disk quota unavailable.
func diskUnavailable() bool {
	once.Do(func() {
		if os.Geteuid() == 0 {
			return
		}
		for _, p := range local.Check(context.Background(), local.Options{}) {
			if p.Name == local.ProtDiskQuota && p.Status == local.StatusUnavailable {
				noDisk = true
			}
		}
	})
	return noDisk
}

// Relax returns the protections a test's backend does without here
// (none as root), and says so in tb's log.
func Relax(tb testing.TB) local.Relax {
	tb.Helper()
	r := Here()
	if r.DiskQuota {
		tb.Logf("%s", Note())
	}
	return r
}

// Here is Relax for callers without a testing.TB (an options helper, a
// TestMain, which prints Note once instead).
func Here() local.Relax { return local.Relax{DiskQuota: diskUnavailable()} }

// Note says what Here relaxes and why, "" for nothing.
func Note() string {
	if !diskUnavailable() {
		return ""
	}
	return fmt.Sprintf("as uid %d the disk quota is unavailable here (sandbox-check says why): the sandboxes run without it (Relax.DiskQuota, --relax=disk)", os.Geteuid())
}

// Flags is Relax as the front ends' flags (--relax=disk), nil for none.
func Flags(tb testing.TB) []string {
	tb.Helper()
	if !Relax(tb).DiskQuota {
		return nil
	}
	return []string{"--relax=disk"}
}

// RequireDiskImage skips, as a user other than root, a test of root's
// disks: ext4 images, loop-mounted on the host (a user's sandboxes get a
// memory disk instead; TestRootlessLimits tests it).
func RequireDiskImage(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skipf("tests root's ext4 disk images; as uid %d sandboxes get a memory disk (TestRootlessLimits): run the tests as root", os.Geteuid())
	}
}

// StateDir returns a new state directory for a test's backend, removed
// when the test ends with its read-only seed directories
// (local.RemoveStateDir), which t.TempDir's cleanup cannot remove as a
// user other than root.
func StateDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "local-state-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := local.RemoveStateDir(dir); err != nil {
			tb.Errorf("remove the test's state directory: %v", err)
		}
	})
	return dir
}
