package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/corpus"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The batch section: many small programs through a few sandboxes, as a
// batch user (tests of many submissions, RL rollouts) runs them (issue
// 27). Config.BatchSize programs, a mix of the corpus's cases, each made
// new code by a file of its own (so neither side's build cache has seen
// it), run by batchWorkers sessions at once, each emptied (Session.Reset)
// before its next program; against the bare host running the same
// programs with as many workers, each in a fresh directory (the corpus's
// oracle). The programs are split in two halves timed host, sandboxes,
// sandboxes, host, so neither side always runs on the warmer or the more
// loaded machine. Every run must exit as its case documents, or the
// section fails: a batch that ran nothing would be fast.

// DefaultBatchSize is how many programs the batch section runs a side.
const DefaultBatchSize = 500

// batchWorkers is how many sessions (and bare host workers) run programs
// at once.
const batchWorkers = 8

// batchTarget is issue 27's bound on the batch's time over the bare host's.
const batchTarget = "<= 1.3"

// batchProgram is one program of the batch: a corpus case made unique.
type batchProgram struct {
	corpus.Case
	n int // its place in the batch
}

// batchSection measures the batch section.
func (r *runner) batchSection(ctx context.Context) error {
	programs, mix, err := batchPrograms(r.cfg.BatchSize)
	if err != nil {
		return err
	}
	b, err := r.newLocal(ctx, local.Options{})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	sessions := make([]*goruntime.Session, batchWorkers)
	for i := range sessions {
		// Whole outputs: RunSession refuses elided ones.
		if sessions[i], err = goruntime.Open(ctx, b, goruntime.Options{HeadBytes: -1, TailBytes: -1}); err != nil {
			return fmt.Errorf("open session %d of %d: %w", i+1, batchWorkers, err)
		}
		defer sessions[i].Close(context.WithoutCancel(ctx))
	}
	tmp, err := os.MkdirTemp("", "bench-batch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	half := len(programs) / 2
	first, second := programs[:half], programs[half:]
	sandboxes := func(ps []batchProgram) (time.Duration, error) { return runBatch(ctx, ps, sessions, "") }
	host := func(ps []batchProgram) (time.Duration, error) { return runBatch(ctx, ps, nil, tmp) }
	var ours, bare time.Duration
	for _, step := range []struct {
		what string
		run  func([]batchProgram) (time.Duration, error)
		ps   []batchProgram
		sum  *time.Duration
	}{
		{"bare host, first half", host, first, &bare},
		{"sandboxes, first half", sandboxes, first, &ours},
		{"sandboxes, second half", sandboxes, second, &ours},
		{"bare host, second half", host, second, &bare},
	} {
		r.logf("batch: %s (%d programs, %d at once, load %.1f)", step.what, len(step.ps), batchWorkers, loadAvg())
		d, err := step.run(step.ps)
		if err != nil {
			return fmt.Errorf("batch, %s: %w", step.what, err)
		}
		*step.sum += d
	}
	n := len(programs)
	r.add(Row{Section: "batch", Figure: fmt.Sprintf("%d corpus programs (new code each) through %d sessions at once, wall time", n, batchWorkers),
		Ours: seconds(ours), Baseline: fmt.Sprintf("bare host, %d workers: %s", batchWorkers, seconds(bare)), Ratio: ratio(ours, bare), Target: batchTarget})
	r.add(Row{Section: "batch", Figure: "programs a minute", Ours: perMinute(n, ours), Baseline: "bare host: " + perMinute(n, bare)})
	r.note("batch: the mix, %s", mix)
	return nil
}

// runBatch runs ps with batchWorkers workers, through sessions when there
// are any, else on the bare host in directories under tmp, and returns the
// wall time. A program that does not exit as its case documents is an
// error.
func runBatch(ctx context.Context, ps []batchProgram, sessions []*goruntime.Session, tmp string) (time.Duration, error) {
	work := make(chan batchProgram)
	errs := make(chan error, batchWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range batchWorkers {
		wg.Go(func() {
			for p := range work {
				var (
					got corpus.Observed
					err error
				)
				if sessions != nil {
					s := sessions[w]
					if err = s.Reset(ctx); err == nil {
						got, err = corpus.RunSession(ctx, s, p.Case)
					}
				} else {
					var dir string
					if got, dir, err = corpus.RunHost(ctx, p.Case, tmp); err == nil {
						err = os.RemoveAll(dir)
					}
				}
				if err == nil && got.ExitCode != p.WantExit {
					err = fmt.Errorf("program %d (case %s) exited %d, want %d: %s", p.n, p.Name, got.ExitCode, p.WantExit, clipText(got.Stderr, 400))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, p := range ps {
		select {
		case work <- p:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil when no worker failed
	}
	return time.Since(start), err
}

// batchPrograms returns n programs cycling through the corpus's cases
// (all but the slow ones and those that wait out a timeout of their own,
// which would measure sleep), each with a file that makes it new code, and
// a line naming the mix.
func batchPrograms(n int) ([]batchProgram, string, error) {
	cases, err := corpus.Load(corpus.Dir())
	if err != nil {
		return nil, "", fmt.Errorf("load the corpus: %w", err)
	}
	var mix []corpus.Case
	for _, c := range cases {
		if c.Slow || c.Timeout != corpus.DefaultTimeout {
			continue
		}
		if _, ok := rootPackage(c); !ok {
			continue // no Go package at the root to add the file to
		}
		mix = append(mix, c)
	}
	if len(mix) == 0 {
		return nil, "", fmt.Errorf("the corpus at %s has no case the batch can use", corpus.Dir())
	}
	programs := make([]batchProgram, n)
	for i := range programs {
		c := mix[i%len(mix)]
		pkg, _ := rootPackage(c)
		c.Files = append(append([]goruntime.File{}, c.Files...), goruntime.File{
			Path: "zz_batch_program.go",
			Data: fmt.Appendf(nil, "package %s\n\n// batchProgram makes this program new code.\nconst batchProgram = %d\n", pkg, i),
		})
		programs[i] = batchProgram{Case: c, n: i}
	}
	return programs, fmt.Sprintf("%d cases of %d (slow ones and those with a timeout of their own left out), cycled", len(mix), len(cases)), nil
}

// rootPackage is the package clause of c's Go files at the module root,
// an external test package's name without its "_test".
func rootPackage(c corpus.Case) (string, bool) {
	for _, f := range c.Files {
		if path.Dir(f.Path) != "." || !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(f.Data))
		for sc.Scan() {
			if name, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "package "); ok {
				name = strings.TrimSuffix(strings.Fields(name)[0], "_test")
				return name, name != ""
			}
		}
	}
	return "", false
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func perMinute(n int, d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(n)/d.Minutes())
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
