// Package localtest is for tests that run the local backend (the backend's
// own, the corpus, cmd/demo's and cmd/mcp-server's). As a user other than
// root they relax the protections that user cannot have on this host (the
// disk quota needs root today: docs/local-backend.md, "Without root"), say
// so in the test log, and run the rest; tests of a relaxed protection skip
// (RequireDiskQuota). As root, or once the disk quota works without root,
// nothing is relaxed: a missing protection fails the tests with its fix.
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
	return fmt.Sprintf("as uid %d the disk quota is unavailable here (it needs root today): the sandboxes run without it (Relax.DiskQuota, --relax=disk), and the disk quota's own tests skip", os.Geteuid())
}

// Flags is Relax as the front ends' flags (--relax=disk), nil for none.
func Flags(tb testing.TB) []string {
	tb.Helper()
	if !Relax(tb).DiskQuota {
		return nil
	}
	return []string{"--relax=disk"}
}

// RequireDiskQuota skips a test of the disk quota where Relax does
// without it.
func RequireDiskQuota(tb testing.TB) {
	tb.Helper()
	if diskUnavailable() {
		tb.Skipf("needs the disk quota, unavailable to uid %d here (it needs root today: run the tests as root)", os.Geteuid())
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
