package corpus_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
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

// TestCorpus runs every case on the host (the oracle) and in a local
// bubblewrap sandbox through goruntime.Session, and compares exit code,
// outcome, stdout and (where the case asks) stderr. Cases share a few
// sandboxes, emptied with Session.Reset between cases.
func TestCorpus(t *testing.T) {
	cases, err := corpus.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	backend, err := local.New(local.Options{})
	if err != nil {
		t.Fatalf("the corpus runs in the local backend, which cannot start here: %v\n"+
			"(bubblewrap comes from scripts/install-deps.sh)", err)
	}
	start := time.Now()
	if err := backend.Prepare(ctx); err != nil {
		t.Fatalf("prepare the local backend's seed build cache: %v", err)
	}
	t.Logf("local backend ready in %v (state in %s)", time.Since(start).Round(time.Millisecond), backend.StateDir())

	pool := openPool(t, ctx, backend, max(*sandboxes, 1))
	tmp := t.TempDir()

	var (
		mu      sync.Mutex
		timings []string
	)
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			if *only != "" && !strings.Contains(c.Name, *only) {
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				if c.Slow && !*runSlow {
					t.Skipf("slow case (%s): opt in with -corpus.slow", c.Note)
				}
				t.Parallel()
				want, hostDir, err := corpus.RunHost(ctx, c, tmp)
				if err != nil {
					t.Fatal(err)
				}
				oracleBad := corpus.CheckOracle(c, want)

				s := <-pool
				defer func() { pool <- s }()
				if err := s.Reset(ctx); err != nil {
					t.Fatalf("reset sandbox %s before case %s: %v", s.ID(), c.Name, err)
				}
				got, err := corpus.RunSession(ctx, s, c)
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				timings = append(timings, fmt.Sprintf("%-22s host %6.2fs  sandbox %6.2fs", c.Name, want.Duration.Seconds(), got.Duration.Seconds()))
				mu.Unlock()

				ms := append(oracleBad, corpus.Compare(c, want, hostDir, got)...)
				if len(ms) == 0 {
					return
				}
				var b strings.Builder
				fmt.Fprintf(&b, "case %s (%s)\ncommand: %s\n", c.Name, c.Note, c.Script())
				for _, m := range ms {
					fmt.Fprintf(&b, "- %s\n", m)
				}
				fmt.Fprintf(&b, "host stderr:\n%s\nsandbox stderr:\n%s", clip.String(want.Stderr, 2000), clip.String(got.Stderr, 2000))
				t.Error(b.String())
			})
		}
	})
	t.Logf("%d cases in %v:\n%s", len(timings), time.Since(start).Round(time.Millisecond), strings.Join(slices.Sorted(slices.Values(timings)), "\n"))
}

// openPool opens n sandboxes that keep whole outputs and closes them when
// the test ends.
func openPool(t *testing.T, ctx context.Context, b goruntime.Backend, n int) chan *goruntime.Session {
	t.Helper()
	pool := make(chan *goruntime.Session, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := goruntime.Open(ctx, b, goruntime.Options{HeadBytes: -1, TailBytes: -1})
			if err != nil {
				errs <- err
				return
			}
			pool <- s
			errs <- nil
		}()
	}
	var err error
	for range n {
		err = errors.Join(err, <-errs)
	}
	t.Cleanup(func() {
		close(pool)
		for s := range pool {
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("close sandbox %s: %v", s.ID(), err)
			}
		}
	})
	if err != nil {
		t.Fatalf("open sandboxes: %v", err)
	}
	return pool
}
