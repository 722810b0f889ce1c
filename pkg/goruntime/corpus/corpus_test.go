package corpus_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/corpus"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

var (
	runSlow   = flag.Bool("corpus.slow", false, "also run the corpus cases marked slow (the -race build)")
	sandboxes = flag.Int("corpus.sandboxes", 2, "sandboxes the corpus runs in, in parallel")
	only      = flag.String("corpus.case", "", "run only the cases whose name contains this")
)

// TestMain lets the local backend re-execute this test binary as the
// runtime server inside bubblewrap (no separate sandbox-server build).
func TestMain(m *testing.M) {
	local.ServeIfChild()
	os.Exit(m.Run())
}

// TestCorpus is the conformance suite (corpus.Run) against the local
// backend: every case on the host and in a local bubblewrap sandbox,
// compared. test/e2e runs the same suite against agent-sandbox.
func TestCorpus(t *testing.T) {
	ctx := context.Background()
	backend, err := local.New(local.Options{Relax: localtest.Relax(t)})
	if err != nil {
		t.Fatalf("the corpus runs in the local backend, which cannot start here: %v\n"+
			"(bubblewrap comes from scripts/install-deps.sh)", err)
	}
	t.Cleanup(func() {
		if err := backend.Close(context.Background()); err != nil {
			t.Errorf("close the local backend: %v", err)
		}
	})
	start := time.Now()
	if err := backend.Prepare(ctx); err != nil {
		t.Fatalf("prepare the local backend's seed build cache: %v", err)
	}
	t.Logf("local backend ready in %v (state in %s)", time.Since(start).Round(time.Millisecond), backend.StateDir())
	sum := corpus.Run(t, backend, corpus.RunOptions{Sandboxes: *sandboxes, Slow: *runSlow, Only: *only})
	if sum.Total == 0 {
		t.Fatal("no case ran")
	}
	t.Logf("corpus: %s on local", sum)
}
