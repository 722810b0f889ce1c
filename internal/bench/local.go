package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// smallModule is the module the go run/build/test figures build: a main
// package with a test, importing a few common packages. round changes a
// constant, so every round compiles new code (nothing of it is cached)
// while its dependencies stay what any program needs.
func smallModule(round int) map[string]string {
	return map[string]string{
		"go.mod": "module example.com/small\n\ngo 1.24\n",
		"main.go": fmt.Sprintf(`package main

import (
	"fmt"
	"sort"
	"strings"
)

const round = %d

func words(s string) []string {
	w := strings.Fields(s)
	sort.Strings(w)
	return w
}

func main() { fmt.Println(round, words("the quick brown fox")) }
`, round),
		"main_test.go": `package main

import "testing"

func TestWords(t *testing.T) {
	if got := words("b a"); len(got) != 2 || got[0] != "a" {
		t.Fatalf("words: %v", got)
	}
}
`,
	}
}

// goCommands are the commands the first/warm figures time.
var goCommands = []string{"go run .", "go build -o app .", "go test ./..."}

// warmTargets are the bounds on a warm session's command against the
// bare host's (issue 41); a command not named has none.
var warmTargets = map[string]string{"go run .": "<= 1.1", "go test ./...": "<= 1.1"}

func files(m map[string]string) []goruntime.File {
	var out []goruntime.File
	for p, c := range m {
		out = append(out, goruntime.File{Path: p, Data: []byte(c)})
	}
	return out
}

// newLocal returns a local backend running our built sandbox-server, its
// seed build cache ready.
func (r *runner) newLocal(ctx context.Context, opts local.Options) (*local.Backend, error) {
	opts.ServerPath = r.bins["sandbox-server"]
	opts.StateDir = r.cfg.StateDir
	b, err := local.New(opts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pctx := goruntime.WithProgress(ctx, func(p goruntime.Progress) { r.logf("%s", p) })
	if err := b.Prepare(pctx); err != nil {
		return nil, err
	}
	if d := time.Since(start); d > 5*time.Second {
		r.note("the local backend built its seed build cache first (%s, once per machine)", d.Round(time.Second))
	}
	return b, nil
}

// hostRun runs command in dir on the bare host with the host's go
// settings (its own warm build cache) and returns how long it took.
func hostRun(ctx context.Context, dir, command string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("host %q: %w: %s", command, err, out)
	}
	return time.Since(start), nil
}

func writeModule(dir string, m map[string]string) error {
	for p, c := range m {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// execOK runs req in s and fails unless the command exits 0.
func execOK(ctx context.Context, s *goruntime.Session, req goruntime.Request) (time.Duration, error) {
	if req.Timeout == 0 {
		req.Timeout = 5 * time.Minute
	}
	start := time.Now()
	res, err := s.Execute(ctx, req)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("%q: exit %d: %s%s", req.Command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return d, nil
}

// localSection measures the local backend against the bare host.
func (r *runner) localSection(ctx context.Context) error {
	b, err := r.newLocal(ctx, local.Options{})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	if err := r.openFigures(ctx, b); err != nil {
		return err
	}
	if err := r.firstWarmFigures(ctx, b); err != nil {
		return err
	}
	return r.concurrentFigure(ctx, b)
}

// waitPool gives b up to 5 s to refill its warm pool, as it would have
// between an agent's commands (agents pause to think): the refill after
// a claim then runs in that pause rather than beside the next timed
// command, whichever figure that command belongs to.
func waitPool(b *local.Backend) {
	for deadline := time.Now().Add(5 * time.Second); b.WarmPoolReady() < local.DefaultWarmPool && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// timeOpen times b.Open (the sandbox ready to serve) and closes the
// sandbox, untimed.
func timeOpen(ctx context.Context, b *local.Backend) (time.Duration, error) {
	start := time.Now()
	sb, err := b.Open(ctx)
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, sb.Close(ctx)
}

// firstRun opens a fresh session of b, times req as its first command
// and closes it (Open and Close untimed).
func firstRun(ctx context.Context, b *local.Backend, req goruntime.Request) (time.Duration, error) {
	fresh, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		return 0, err
	}
	d, err := execOK(ctx, fresh, req)
	_ = fresh.Close(context.WithoutCancel(ctx))
	if err != nil {
		return 0, fmt.Errorf("first run: %w", err)
	}
	return d, nil
}

// openFigures times Open (the sandbox ready to serve) with the default
// warm pool and without one; Close is not timed. Between opens the
// backend gets up to 5 s to refill its pool, as it would between an
// agent's sessions.
func (r *runner) openFigures(ctx context.Context, pooled *local.Backend) error {
	unpooled, err := r.newLocal(ctx, local.Options{WarmPool: -1})
	if err != nil {
		return err
	}
	defer unpooled.Close(context.WithoutCancel(ctx))
	s, err := interleaved(r.cfg.Rounds*2,
		func() (time.Duration, error) { waitPool(pooled); return timeOpen(ctx, pooled) },
		func() (time.Duration, error) { return timeOpen(ctx, unpooled) })
	if err != nil {
		return err
	}
	on, off := s[0].p50(), s[1].p50()
	r.add(Row{Section: "local", Figure: "open a sandbox with the warm pool, p50", Ours: ms(on), Baseline: "target 10 ms",
		Ratio: ratio(on, 10*time.Millisecond), Target: "<= 1"})
	r.add(Row{Section: "local", Figure: "open a sandbox with the warm pool, p50", Ours: ms(on), Baseline: "without the pool (a start): " + ms(off),
		Ratio: ratio(on, off), Speedup: true})
	return nil
}

// firstWarmFigures times each go command on a small module with new code:
// as the first command of a fresh session, in a warm session that has run
// others, and on the bare host. Every sandbox figure includes shipping the
// files. Each timed command starts with the warm pool full (waitPool), so
// no figure carries the refill that follows a claim.
func (r *runner) firstWarmFigures(ctx context.Context, b *local.Backend) error {
	warm, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		return err
	}
	defer warm.Close(context.WithoutCancel(ctx))
	host, err := os.MkdirTemp("", "bench-host-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(host)
	for _, c := range goCommands { // warm the warm session and the host
		if _, err := execOK(ctx, warm, goruntime.Request{Files: files(smallModule(-1)), Command: c}); err != nil {
			return err
		}
		if err := writeModule(host, smallModule(-1)); err != nil {
			return err
		}
		if _, err := hostRun(ctx, host, c); err != nil {
			return err
		}
	}
	first, warmRuns, bare := map[string]durations{}, map[string]durations{}, map[string]durations{}
	for round := 0; round < r.cfg.Rounds; round++ {
		for ci, c := range goCommands {
			code := round*len(goCommands) + ci
			waitPool(b)
			d, err := firstRun(ctx, b, goruntime.Request{Files: files(smallModule(1000 + code)), Command: c})
			if err != nil {
				return err
			}
			first[c] = append(first[c], d)
			waitPool(b)
			if d, err = execOK(ctx, warm, goruntime.Request{Files: files(smallModule(2000 + code)), Command: c}); err != nil {
				return fmt.Errorf("warm run: %w", err)
			}
			warmRuns[c] = append(warmRuns[c], d)
			waitPool(b)
			if err := writeModule(host, smallModule(3000+code)); err != nil {
				return err
			}
			if d, err = hostRun(ctx, host, c); err != nil {
				return err
			}
			bare[c] = append(bare[c], d)
		}
	}
	for _, c := range goCommands {
		f, w, h := first[c].p50(), warmRuns[c].p50(), bare[c].p50()
		r.add(Row{Section: "local", Figure: fmt.Sprintf("first `%s` of new code in a fresh session, p50", c), Ours: ms(f),
			Baseline: "same in a warm session: " + ms(w), Ratio: ratio(f, w), Target: "<= 1.2"})
		r.add(Row{Section: "local", Figure: fmt.Sprintf("warm `%s` of new code, p50", c), Ours: ms(w),
			Baseline: "bare host: " + ms(h), Ratio: ratio(w, h), Target: warmTargets[c]})
	}
	return nil
}

// concurrentFigure opens 8 sandboxes at once and runs a small module in
// each (open, ship, go run, close), against 8 bare host go runs at once.
func (r *runner) concurrentFigure(ctx context.Context, b *local.Backend) error {
	const n = 8
	var sandboxed, bare durations
	rounds := max(r.cfg.Rounds/3, 1)
	for round := 0; round < rounds; round++ {
		start := time.Now()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s, err := goruntime.Open(ctx, b, goruntime.Options{})
				if err != nil {
					errs[i] = err
					return
				}
				defer s.Close(context.WithoutCancel(ctx))
				_, errs[i] = execOK(ctx, s, goruntime.Request{Files: files(smallModule(5000 + round*n + i)), Command: "go run ."})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("8 at once: %w", err)
			}
		}
		sandboxed = append(sandboxed, time.Since(start))

		dirs := make([]string, n)
		for i := range n {
			dir, err := os.MkdirTemp("", "bench-host-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if err := writeModule(dir, smallModule(6000+round*n+i)); err != nil {
				return err
			}
			dirs[i] = dir
		}
		start = time.Now()
		for i := range n {
			wg.Go(func() { _, errs[i] = hostRun(ctx, dirs[i], "go run .") })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		bare = append(bare, time.Since(start))
	}
	s, h := sandboxed.p50(), bare.p50()
	r.add(Row{Section: "local", Figure: "8 sandboxes at once: open + `go run .` + close, wall time p50", Ours: ms(s),
		Baseline: "8 bare host go runs at once: " + ms(h), Ratio: ratio(s, h)})
	return nil
}
