package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The scale section: many live local sandboxes on one host (issue 27).
// For each size N (Config.ScaleSizes) it opens N sandboxes and keeps them
// live and idle, then measures the host memory each costs (the drop in
// MemAvailable, which counts bubblewrap, the server, kernel memory for
// namespaces and cgroups, the disk's mounts and page cache, not only the
// server's RSS), Open with N live when opens arrive at 10 a second (the
// warm pool on; with the largest N also at 5 a second), a start without
// the pool, a warm `go run` in one of them
// and the teardown of all;
// after the teardown nothing may be left on the host (hostleaks), or the
// section fails. Then the sustained rate of open+close with the pool
// refilling. Figures are absolute (targets of issue 27), so they hold
// only for the machine and load printed above the table.

// DefaultScaleSizes are the live sandbox counts the scale section measures.
var DefaultScaleSizes = []int{50, 200, 500, 1000}

// Targets of issue 27.
const (
	scaleMemTarget      = 3.0                    // MiB of host memory per live idle sandbox
	scaleOpenP99Target  = 10 * time.Millisecond  // Open p99 with the largest N live, at 10/s
	scaleTeardownTarget = 20 * time.Second       // all of 1,000 closed
	scaleRateTarget     = 40.0                   // opens+closes a second, sustained
	scaleOpenInterval   = 100 * time.Millisecond // 10 opens a second
	// scaleOpenHalfRate paces Opens at 5 a second, with the largest N
	// live: on a host whose sustained open+close rate is near 10 a second
	// (a slow VM), 10 a second keeps every pool start busy and measures
	// that ceiling rather than the pool.
	scaleOpenHalfRate   = 200 * time.Millisecond
	scaleThroughputTime = 20 * time.Second // how long the sustained rate is measured
	scaleLeakWait       = 20 * time.Second // how long a teardown may take to free everything
)

// scaleSection measures the scale section.
func (r *runner) scaleSection(ctx context.Context) error {
	b, err := r.newLocal(ctx, local.Options{})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	// A second backend of the same state directory, without a pool: what
	// a start itself costs with N live.
	cold, err := r.newLocal(ctx, local.Options{WarmPool: -1})
	if err != nil {
		return err
	}
	defer cold.Close(context.WithoutCancel(ctx))
	for _, n := range r.cfg.ScaleSizes {
		if err := r.scaleRound(ctx, b, cold, n); err != nil {
			return fmt.Errorf("%d live sandboxes: %w", n, err)
		}
	}
	return r.scaleThroughput(ctx, b)
}

// live is one sandbox the scale section keeps open.
type live struct {
	sb  *local.Sandbox
	rec hostleaks.Sandbox
	mem string // its memory cgroup directory
}

// settle waits for the warm pool to be full and the refills and spare
// fillers after it to end, so a memory reading counts idle sandboxes.
func settle(b *local.Backend) {
	waitPool(b)
	time.Sleep(3 * time.Second)
}

// scaleRound measures the figures for n live sandboxes of b (and starts
// with cold, a backend without a pool) and tears them down.
func (r *runner) scaleRound(ctx context.Context, b, cold *local.Backend, n int) error {
	settle(b)
	before, err := memAvailable()
	if err != nil {
		return err
	}
	r.logf("scale: opening %d sandboxes (load %.2f)", n, loadAvg())
	start := time.Now()
	sandboxes, err := openMany(ctx, b, n)
	bulk := time.Since(start)
	defer func() {
		// On an error below: close what is open, untimed.
		if sandboxes != nil {
			closeMany(ctx, sandboxes)
		}
	}()
	if err != nil {
		return err
	}
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("open %d sandboxes, 4 at a time (load %.1f)", n, loadAvg()),
		Ours: fmt.Sprintf("%.1f s (%.0f/s)", bulk.Seconds(), float64(n)/bulk.Seconds()), Ratio: math.NaN()})

	settle(b)
	after, err := memAvailable()
	if err != nil {
		return err
	}
	perMiB := float64(before-after) / float64(n) / (1 << 20)
	var charged int64
	for _, s := range sandboxes {
		charged += max(readInt(filepath.Join(s.mem, "memory.usage_in_bytes")), readInt(filepath.Join(s.mem, "memory.current")))
	}
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("host memory per live idle sandbox, %d live (MemAvailable drop)", n),
		Ours: fmt.Sprintf("%.2f MiB", perMiB), Baseline: fmt.Sprintf("target %.0f MiB", scaleMemTarget),
		Ratio: perMiB / scaleMemTarget, Target: "<= 1"})
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("of which charged to the sandboxes' memory cgroups, %d live", n),
		Ours: fmt.Sprintf("%.2f MiB", float64(charged)/float64(n)/(1<<20)), Ratio: math.NaN()})

	largest := n == r.cfg.ScaleSizes[len(r.cfg.ScaleSizes)-1]
	opens, err := pacedOpens(ctx, b, max(20, r.cfg.Rounds*2), scaleOpenInterval)
	if err != nil {
		return err
	}
	row := Row{Section: "scale", Figure: fmt.Sprintf("open with %d live, at 10/s, p50 / p99", n),
		Ours: ms(opens.p50()) + " / " + ms(opens.pct(99)), Ratio: math.NaN()}
	if largest {
		row.Baseline = "p99 target " + ms(scaleOpenP99Target)
		row.Ratio, row.Target = ratio(opens.pct(99), scaleOpenP99Target), "<= 1"
	}
	r.add(row)
	if largest {
		settle(b)
		opens, err := pacedOpens(ctx, b, max(20, r.cfg.Rounds*2), scaleOpenHalfRate)
		if err != nil {
			return err
		}
		r.add(Row{Section: "scale", Figure: fmt.Sprintf("open with %d live, at 5/s, p50 / p99", n),
			Ours: ms(opens.p50()) + " / " + ms(opens.pct(99)), Ratio: math.NaN()})
	}

	settle(b) // not beside the pool's refills after the opens above
	starts, err := pacedOpens(ctx, cold, max(8, r.cfg.Rounds), scaleOpenInterval)
	if err != nil {
		return err
	}
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("start with %d live (no pool: one at a time), p50 / p99", n),
		Ours: ms(starts.p50()) + " / " + ms(starts.pct(99)), Ratio: math.NaN()})

	runs, bare, err := r.warmRuns(ctx, sandboxes[0].sb)
	if err != nil {
		return err
	}
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("warm `go run` of new code with %d live, p50 / p99", n),
		Ours: ms(runs.p50()) + " / " + ms(runs.pct(99)), Baseline: "bare host p50: " + ms(bare.p50()), Ratio: ratio(runs.p50(), bare.p50())})

	start = time.Now()
	recs := closeMany(ctx, sandboxes)
	sandboxes = nil
	down := time.Since(start)
	row = Row{Section: "scale", Figure: fmt.Sprintf("close all %d, 8 at a time", n), Ours: fmt.Sprintf("%.1f s", down.Seconds()), Ratio: math.NaN()}
	if n >= 1000 {
		target := scaleTeardownTarget * time.Duration(n) / 1000
		row.Baseline, row.Ratio, row.Target = "target "+target.String(), ratio(down, target), "<= 1"
	}
	r.add(row)
	leaks, freed := waitNoLeaks(b.StateDir(), recs)
	if len(leaks) > 0 {
		if len(leaks) > 20 {
			leaks = append(leaks[:20], fmt.Sprintf("... and %d more", len(leaks)-20))
		}
		return fmt.Errorf("after closing %d sandboxes, %s later the host still holds:\n%s", n, freed, strings.Join(leaks, "\n"))
	}
	r.note("scale: after closing %d sandboxes the host held nothing of them (processes, cgroups, mounts, loop devices, uid leases, directories) within %s", n, freed.Round(100*time.Millisecond))
	return nil
}

// openMany opens n sandboxes, 4 at a time, and records each.
func openMany(ctx context.Context, b *local.Backend, n int) ([]live, error) {
	out := make([]live, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sb, err := b.Open(ctx)
				if err != nil {
					errs <- fmt.Errorf("open sandbox %d of %d: %w", i+1, n, err)
					continue
				}
				s := sb.(*local.Sandbox)
				l := live{sb: s}
				if l.rec, err = hostleaks.Record(s.Dir()); err == nil {
					l.mem, err = memoryCgroup(s.Dir())
				}
				if err != nil {
					errs <- err
				}
				out[i] = l
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		var opened []live
		for _, l := range out {
			if l.sb != nil {
				opened = append(opened, l)
			}
		}
		closeMany(ctx, opened)
		return nil, err
	}
	return out, nil
}

// closeMany closes the sandboxes, 8 at a time, and returns their records.
func closeMany(ctx context.Context, sandboxes []live) []hostleaks.Sandbox {
	next := make(chan live)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range next {
				_ = l.sb.Close(context.WithoutCancel(ctx))
			}
		}()
	}
	var recs []hostleaks.Sandbox
	for _, l := range sandboxes {
		recs = append(recs, l.rec)
		next <- l
	}
	close(next)
	wg.Wait()
	return recs
}

// pacedOpens times count Opens started every apart, each closed right
// after, untimed, so the number live stays as it was.
func pacedOpens(ctx context.Context, b *local.Backend, count int, every time.Duration) (durations, error) {
	var d durations
	for i := 0; i < count; i++ {
		slot := time.Now()
		sb, err := b.Open(ctx)
		if err != nil {
			return nil, err
		}
		d = append(d, time.Since(slot))
		if err := sb.Close(ctx); err != nil {
			return nil, err
		}
		time.Sleep(time.Until(slot.Add(every)))
	}
	return d, nil
}

// warmRuns times `go run .` of new code in sb after one warm-up, and the
// same on the bare host, interleaved.
func (r *runner) warmRuns(ctx context.Context, sb *local.Sandbox) (sandbox, bare durations, err error) {
	s := goruntime.NewSession(sb, goruntime.Options{})
	host, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(host)
	code := 5000
	samples, err := interleaved(r.cfg.Rounds,
		func() (time.Duration, error) {
			code++
			return execOK(ctx, s, goruntime.Request{Files: files(smallModule(code)), Command: "go run ."})
		},
		func() (time.Duration, error) {
			code++
			if err := writeModule(host, smallModule(code)); err != nil {
				return 0, err
			}
			return hostRun(ctx, host, "go run .")
		})
	if err != nil {
		return nil, nil, err
	}
	return samples[0], samples[1], nil
}

// scaleThroughput measures sandboxes opened and closed a second,
// sustained for scaleThroughputTime by 2 workers per CPU, the warm pool
// refilling (each open a fresh server).
func (r *runner) scaleThroughput(ctx context.Context, b *local.Backend) error {
	settle(b)
	workers := 2 * runtime.NumCPU()
	var (
		mu    sync.Mutex
		done  int
		first error
		recs  []hostleaks.Sandbox
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(scaleThroughputTime)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				sb, err := b.Open(ctx)
				if err == nil {
					rec, rerr := hostleaks.Record(sb.(*local.Sandbox).Dir())
					err = sb.Close(ctx)
					if err == nil {
						err = rerr
					}
					mu.Lock()
					recs = append(recs, rec)
					mu.Unlock()
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					done++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return fmt.Errorf("sustained open+close: %w", first)
	}
	rate := float64(done) / elapsed.Seconds()
	r.add(Row{Section: "scale", Figure: fmt.Sprintf("sandboxes opened and closed a second, sustained %s, %d at a time (load %.1f)", scaleThroughputTime, workers, loadAvg()),
		Ours: fmt.Sprintf("%.1f/s", rate), Baseline: fmt.Sprintf("target %.0f/s", scaleRateTarget),
		Ratio: rate / scaleRateTarget, Target: ">= 1"})
	if leaks, freed := waitNoLeaks(b.StateDir(), recs); len(leaks) > 0 {
		return fmt.Errorf("after %d opens and closes, %s later the host still holds:\n%s", done, freed, strings.Join(leaks[:min(20, len(leaks))], "\n"))
	}
	return nil
}
