package corpus

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// RunOptions tune Run. The zero value runs every case but the slow ones,
// from this package's testdata, in two sandboxes.
type RunOptions struct {
	// Dir holds the cases; default Dir().
	Dir string
	// Sandboxes is how many sandboxes run cases in parallel; default 2.
	Sandboxes int
	// Slow also runs the cases marked slow.
	Slow bool
	// Only runs only the cases whose name contains it.
	Only string
	// Cases runs only the cases of these names (every case when empty);
	// a name no case has fails the run, so that a renamed case is not
	// dropped unseen.
	Cases []string
}

// Summary is what Run did.
type Summary struct {
	// Passed and Total count the cases run (skipped ones are in neither).
	Passed, Total int
}

func (s Summary) String() string { return fmt.Sprintf("%d/%d", s.Passed, s.Total) }

// Dir is the corpus's own cases: the testdata directory beside this
// package's source, which a test binary built from this source tree finds.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// pick returns the cases opts selects by name (Only, Cases), in order;
// slow ones stay in (Run skips them visibly). A name in Cases that no
// case has is an error.
func (opts RunOptions) pick(cases []Case) ([]Case, error) {
	for _, name := range opts.Cases {
		if !slices.ContainsFunc(cases, func(c Case) bool { return c.Name == name }) {
			return nil, fmt.Errorf("no case %q in %s", name, opts.Dir)
		}
	}
	return slices.DeleteFunc(cases, func(c Case) bool {
		return opts.Only != "" && !strings.Contains(c.Name, opts.Only) ||
			len(opts.Cases) > 0 && !slices.Contains(opts.Cases, c.Name)
	}), nil
}

// Run is the conformance suite any backend runs: every case of the corpus
// on the host (the oracle) and through a goruntime.Session on b, compared
// (exit code, outcome, stdout, stderr where the case asks, the Go-aware
// results), each case a subtest of t under "case/". Cases share
// opts.Sandboxes sandboxes, emptied with Session.Reset between cases, and
// closed when Run returns. The host needs the go command of the Go
// version b's sandboxes run.
func Run(t *testing.T, b goruntime.Backend, opts RunOptions) Summary {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = Dir()
	}
	cases, err := Load(opts.Dir)
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	if cases, err = opts.pick(cases); err != nil {
		t.Fatalf("corpus: %v", err)
	}
	ctx := context.Background()
	start := time.Now()
	if opts.Sandboxes <= 0 {
		opts.Sandboxes = 2
	}
	pool := openPool(t, ctx, b, opts.Sandboxes)
	defer closePool(t, pool)
	tmp := t.TempDir()

	var (
		mu      sync.Mutex
		sum     Summary
		timings []string
	)
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) {
				if c.Slow && !opts.Slow {
					t.Skipf("slow case (%s)", c.Note)
				}
				t.Parallel()
				mu.Lock()
				sum.Total++
				mu.Unlock()
				timing := runCase(t, ctx, c, tmp, pool)
				mu.Lock()
				defer mu.Unlock()
				timings = append(timings, timing)
				if !t.Failed() {
					sum.Passed++
				}
			})
		}
	})
	t.Logf("corpus: %s on %s in %v:\n%s", sum, b.Name(), time.Since(start).Round(time.Millisecond),
		strings.Join(slices.Sorted(slices.Values(timings)), "\n"))
	return sum
}

// runCase runs c on the host and in a sandbox from pool, side by side
// (a case that waits out its timeout then waits once, not twice), failing
// t with every mismatch, and returns a line of their timings.
func runCase(t *testing.T, ctx context.Context, c Case, tmp string, pool chan *goruntime.Session) string {
	t.Helper()
	type hostRun struct {
		want Observed
		dir  string
		err  error
	}
	host := make(chan hostRun, 1)
	go func() {
		want, dir, err := RunHost(ctx, c, tmp)
		host <- hostRun{want, dir, err}
	}()
	hostDone := false
	defer func() {
		if !hostDone { // the sandbox side failed first: the host's run still writes under tmp
			<-host
		}
	}()

	s := <-pool
	defer func() { pool <- s }()
	if err := s.Reset(ctx); err != nil {
		t.Fatalf("reset sandbox %s before case %s: %v", s.ID(), c.Name, err)
	}
	got, err := RunSession(ctx, s, c)
	if err != nil {
		t.Fatal(err)
	}
	h := <-host
	hostDone = true
	if h.err != nil {
		t.Fatal(h.err)
	}
	want, hostDir := h.want, h.dir
	oracleBad := CheckOracle(c, want)
	timing := fmt.Sprintf("%-22s host %6.2fs  sandbox %6.2fs", c.Name, want.Duration.Seconds(), got.Duration.Seconds())
	ms := append(oracleBad, Compare(c, want, hostDir, got)...)
	if len(ms) == 0 {
		return timing
	}
	var b strings.Builder
	fmt.Fprintf(&b, "case %s (%s)\ncommand: %s\n", c.Name, c.Note, c.Script())
	for _, m := range ms {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	fmt.Fprintf(&b, "host stderr:\n%s\nsandbox stderr:\n%s", clip.String(want.Stderr, 2000), clip.String(got.Stderr, 2000))
	t.Error(b.String())
	return timing
}

// openPool opens n sandboxes on b that keep whole outputs (a result with
// elided bytes cannot be compared).
func openPool(t *testing.T, ctx context.Context, b goruntime.Backend, n int) chan *goruntime.Session {
	t.Helper()
	pool := make(chan *goruntime.Session, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := goruntime.Open(ctx, b, goruntime.Options{HeadBytes: -1, TailBytes: -1})
			if err != nil {
				errs <- fmt.Errorf("open a %s sandbox: %w", b.Name(), err)
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
	if err != nil {
		closePool(t, pool)
		t.Fatalf("corpus: %v", err)
	}
	return pool
}

// closePool closes the sandboxes in pool.
func closePool(t *testing.T, pool chan *goruntime.Session) {
	t.Helper()
	for {
		select {
		case s := <-pool:
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("close sandbox %s: %v", s.ID(), err)
			}
		default:
			return
		}
	}
}
