package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// Tests of a sandbox start (open.go): how a start that fails at one of
// its steps says so, and leaves nothing behind. The steps' undo on their
// own: open_internal_test.go.

// TestServerThatDoesNotServe: a server binary that is not ours is refused
// by New, which has the gate make a network namespace first, naming the
// binary; with the checks that run a gate relaxed it ends as the gate, before its
// release, or before it answers, and whichever step sees it first, Open
// says the sandbox ended before its server answered.
func TestServerThatDoesNotServe(t *testing.T) {
	opts := testOptions()
	// /bin/true, with the real process API companion next to it.
	dir := t.TempDir()
	opts.ServerPath = filepath.Join(dir, "true")
	if err := os.Symlink("/bin/true", opts.ServerPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(serverPath), "sandbox-processapi"), filepath.Join(dir, "sandbox-processapi")); err != nil {
		t.Fatal(err)
	}
	opts.StartTimeout = 5 * time.Second
	_, err := local.New(opts)
	if !errors.Is(err, goruntime.ErrUnavailable) || !strings.Contains(err.Error(), "/true did not run as the sandbox's gate") {
		t.Errorf("New with /bin/true as server: %v, want it refused, naming the binary", err)
	}
	// Relaxed, New tries no gate, and Open meets the binary first (a
	// user's memory disk is tried with one too; root's disk is not).
	opts.Relax.Connections = true
	if os.Geteuid() != 0 {
		opts.Relax.DiskQuota = true
	}
	b := newBackend(t, opts)
	_, err = b.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), "before its runtime server answered") {
		t.Errorf("Open with /bin/true as server: %v", err)
	}
	t.Logf("Open with /bin/true as server: %v", err)
}
