package bench

// The cpu-share section: does a sandbox outrank the user who started it?
// A CPU-bound program in a local sandbox and the same program started by
// the bench (the sandboxes' caller) run side by side, each for a few
// seconds, while busy loops keep every CPU of the machine busy; the
// figure is the CPU the sandboxed one got over the CPU the caller's got.
// The two programs and two of the busy loops keep to the first CPU (the
// other loops to the others), so that what each gets is what its weight
// gives it there, not where the scheduler's balancing put it.
// The sandboxes' group weighs as the caller (local.Options.CPUWeight,
// docs/local-backend.md "Limits"): the two should get the same, at nice 0
// and at nice 10. One more variant gives the group the former fixed weight
// (1024 per CPU), for comparison.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// cpuShareWindow is how long each side keeps busy in a round.
const cpuShareWindow = 5 * time.Second

// cpuShareTarget bounds the sandbox's CPU over the caller's: within 20%.
var cpuShareTarget = [2]string{"<= 1.2", ">= 0.8"}

// cpuVariant is one way the section runs both sides.
type cpuVariant struct {
	name string
	b    *local.Backend
	nice int // the caller's nice value, and its program's
	// target: the sandbox must get what the caller's program gets.
	target    bool
	shares    [2][]float64 // the sandbox's and the caller's program's CPU, each round
	closeErrs []error      // of the rounds' sandboxes' Close
}

// ratio is the CPU the sandboxed program got over all rounds over the
// caller's: steadier than a median of rounds, which other work on the
// machine sways one way or the other.
func (v *cpuVariant) ratio() float64 { return sum(v.shares[0]) / sum(v.shares[1]) }

// cpuShareSection measures the cpu-share section.
func (r *runner) cpuShareSection(ctx context.Context) (err error) {
	dir, err := os.MkdirTemp("", "bench-cpushare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spin, err := buildSpin(ctx, dir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(spin)
	if err != nil {
		return err
	}
	group, why := isolateCPU()
	if group != nil {
		r.logf("cpu-share: measuring in the cpu cgroup %s", group.dir)
		defer func() {
			if uerr := group.undo(); uerr != nil && err == nil {
				err = fmt.Errorf("leave the cpu cgroup %s: %w", group.dir, uerr)
			}
		}()
	} else {
		r.note("cpu-share: measured in this process's own cgroup (%s): other backends in that cgroup share the sandboxes' group and may set its weight meanwhile; the caller at nice 10 is not measured", why)
	}

	own, err := r.newLocal(ctx, local.Options{WarmPool: -1})
	if err != nil {
		return err
	}
	defer own.Close(context.WithoutCancel(ctx))
	// The extra seed's build, which a backend starts in the background,
	// would otherwise compete with the rounds (minutes, once a machine).
	start := time.Now()
	if err := own.PrepareExtra(ctx); err != nil {
		return err
	}
	if d := time.Since(start); d > 5*time.Second {
		r.note("cpu-share: the local backend built its extra seed build cache first (%s, once per machine)", d.Round(time.Second))
	}
	former := runtime.NumCPU() * 1024
	fixed, err := r.newLocal(ctx, local.Options{WarmPool: -1, CPUWeight: former})
	if err != nil {
		return err
	}
	defer fixed.Close(context.WithoutCancel(ctx))
	nice, err := niceOf(os.Getpid())
	if err != nil {
		return err
	}
	variants := []*cpuVariant{{name: fmt.Sprintf("caller at nice %d", nice), b: own, nice: nice, target: true}}
	if group != nil && nice < 10 {
		variants = append(variants, &cpuVariant{name: "caller at nice 10", b: own, nice: 10, target: true})
	}
	variants = append(variants, &cpuVariant{name: fmt.Sprintf("the former fixed weight (%d), caller at nice %d", former, nice), b: fixed, nice: nice})

	const perCPU = 2
	busy := perCPU * runtime.NumCPU()
	loops, err := startBusy(spin, perCPU)
	if err != nil {
		return err
	}
	defer loops.stop()
	rounds := max(3, r.cfg.Rounds/2)
	for round := range rounds {
		for _, v := range variants {
			sandbox, caller, err := cpuShareRound(ctx, v, spin, data, loops)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", v.name, round+1, err)
			}
			r.logf("cpu-share: %s, round %d: sandbox %.3f CPU, caller's %.3f CPU", v.name, round+1, sandbox, caller)
			v.shares[0], v.shares[1] = append(v.shares[0], sandbox), append(v.shares[1], caller)
		}
	}
	for _, v := range variants {
		if len(v.closeErrs) > 0 {
			r.note("cpu-share: %s: %d of %d sandboxes' Close failed, the first: %v", v.name, len(v.closeErrs), rounds, v.closeErrs[0])
		}
		figure := fmt.Sprintf("CPU-bound program in a sandbox, %s, %d busy loops: its CPU / the same program the caller started, both on CPU 0, %d rounds of %s", v.name, busy, rounds, cpuShareWindow)
		row := Row{Section: "cpu-share", Figure: figure, Ours: fmt.Sprintf("%.3f CPU", mean(v.shares[0])),
			Baseline: fmt.Sprintf("the caller's: %.3f CPU", mean(v.shares[1])), Ratio: v.ratio()}
		if !v.target {
			r.add(row)
			continue
		}
		for _, t := range cpuShareTarget {
			row.Target = t
			r.add(row)
		}
	}
	return nil
}

// cpuShareRound opens a sandbox of v (its start sets the sandboxes'
// group's weight from the caller's nice value), runs spin in it and on
// the host side by side with the busy loops going, and returns the CPU
// each got.
func cpuShareRound(ctx context.Context, v *cpuVariant, spin string, data []byte, loops busyLoops) (sandbox, caller float64, err error) {
	s, err := openAt(ctx, v.b, v.nice)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		// Not this figure's failure: said under the table.
		if cerr := s.Close(context.WithoutCancel(ctx)); cerr != nil {
			v.closeErrs = append(v.closeErrs, cerr)
		}
	}()
	if _, err := execOK(ctx, s, goruntime.Request{Files: []goruntime.File{{Path: "spin", Data: data, Mode: 0o755}}, Command: "true"}); err != nil {
		return 0, 0, err
	}
	type result struct {
		share float64
		err   error
	}
	loops.resume()
	defer loops.pause()
	inSandbox := make(chan result, 1)
	go func() {
		res, err := s.Execute(ctx, goruntime.Request{Command: "./spin " + strings.Join(spinArgs(cpuShareWindow, 0), " "), Timeout: time.Minute})
		switch {
		case err != nil:
			inSandbox <- result{err: err}
		case res.ExitCode != 0:
			inSandbox <- result{err: fmt.Errorf("the CPU-bound program in the sandbox: exit %d: %s", res.ExitCode, res.Stderr)}
		default:
			share, err := spinShare(res.Stdout)
			inSandbox <- result{share, err}
		}
	}()
	caller, cerr := runSpin(ctx, spin, cpuShareWindow, 0, v.nice)
	sr := <-inSandbox
	if err := errors.Join(cerr, sr.err); err != nil {
		return 0, 0, err
	}
	return sr.share, caller, nil
}

// openAt opens a session of b with this process's main thread, whose
// nice value the backend reads as the caller's (as renice sets it), at
// nice, and puts the thread back to the nice value it had.
func openAt(ctx context.Context, b *local.Backend, nice int) (*goruntime.Session, error) {
	pid := os.Getpid()
	was, err := niceOf(pid)
	if err != nil {
		return nil, err
	}
	if nice == was {
		return goruntime.Open(ctx, b, goruntime.Options{})
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, pid, nice); err != nil {
		return nil, fmt.Errorf("set this process's nice value to %d: %w", nice, err)
	}
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	// Back down needs root (the section runs such a variant only as root).
	if rerr := unix.Setpriority(unix.PRIO_PROCESS, pid, was); rerr != nil {
		if s != nil {
			_ = s.Close(context.WithoutCancel(ctx))
		}
		return nil, errors.Join(err, fmt.Errorf("set this process's nice value back to %d: %w", was, rerr))
	}
	return s, err
}

// niceOf is the nice value of thread tid (a process's main thread: its
// pid).
func niceOf(tid int) (int, error) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, fmt.Errorf("read the nice value of %d: %w", tid, err)
	}
	return 20 - prio, nil // the raw system call returns 20 - nice
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

func mean(xs []float64) float64 { return sum(xs) / float64(max(len(xs), 1)) }
