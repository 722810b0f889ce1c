package disk

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCacheAddedFollowsNoLink: the build cache's upper directory is the
// sandbox's to shape, and it can swap one of its directories for a
// symlink to a host directory between CacheAdded's listing and its read
// of that directory (renameat2 RENAME_EXCHANGE in a loop). CacheAdded
// runs on the host, as root for root's sandboxes: it must never list
// what the link leads to.
func TestCacheAddedFollowsNoLink(t *testing.T) {
	d := Disk{Dir: t.TempDir()}
	upper := filepath.Join(d.Dir, overlayUpper)
	host := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(host, "HOST_SECRET"), nil, 0o600))
	must(os.MkdirAll(filepath.Join(upper, "aa"), 0o700))
	must(os.WriteFile(filepath.Join(upper, "aa", "aa01-d"), nil, 0o600))
	must(os.Mkdir(filepath.Join(upper, "qq"), 0o700))
	must(os.WriteFile(filepath.Join(upper, "qq", "qq01-d"), nil, 0o600))
	must(os.Symlink(host, filepath.Join(upper, "qs")))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(upper, "qq"), unix.AT_FDCWD, filepath.Join(upper, "qs"), unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for range 3000 {
		files, ok, err := d.CacheAdded()
		if err != nil || !ok {
			t.Fatalf("CacheAdded: %v, %v", ok, err)
		}
		for _, f := range files {
			if strings.Contains(f, "HOST_SECRET") {
				t.Fatalf("CacheAdded listed a host directory's file through a swapped symlink: %q", files)
			}
		}
		if !slices.Contains(files, "aa/aa01-d") {
			t.Fatalf("CacheAdded lost the cache's own file: %q", files)
		}
	}
}
