package local

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSpareCachesFillAndClaim: the spare caches of a seed fill their
// directory to spareCachesKept, a claim moves one to the sandbox (and the
// next refill makes it good), and nothing fills after Close.
func TestSpareCachesFillAndClaim(t *testing.T) {
	state := t.TempDir()
	seedDir := filepath.Join(state, "seed", "base")
	if err := os.MkdirAll(filepath.Join(seedDir, "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seedDir, "ab", "obj-d"), []byte("compiled"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCacheStore(Options{StateDir: state, Logger: slog.New(slog.DiscardHandler)})
	shelf := spareCacheShelf(c.dir(seedDir))
	ready := func() int { n, _ := shelf.Len(); return n }
	waitReady := func(n int) {
		t.Helper()
		for ready() != n {
			select {
			case <-t.Context().Done():
				t.Fatalf("spare caches: %d ready, want %d", ready(), n)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	c.refill(seedDir)
	waitReady(spareCachesKept)
	dst := filepath.Join(state, "claimed")
	if !c.claim(seedDir, dst) {
		t.Fatal("claim found no spare in a full pool")
	}
	if data, err := os.ReadFile(filepath.Join(dst, "ab", "obj-d")); err != nil || string(data) != "compiled" {
		t.Fatalf("claimed cache holds %q, %v; want the seed's file", data, err)
	}
	c.refill(seedDir)
	waitReady(spareCachesKept)

	if err := c.spares.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.claim(seedDir, filepath.Join(state, "claimed2")) {
		t.Fatal("claim after Close: the caches on disk outlive the backend, and should be claimed")
	}
	c.refill(seedDir) // closed: fills nothing
	if n := ready(); n != spareCachesKept-1 {
		t.Fatalf("after Close and a claim: %d ready, want %d (no refill)", n, spareCachesKept-1)
	}
}
