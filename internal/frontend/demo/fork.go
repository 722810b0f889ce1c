package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// FlowFork is the fork flow (RunFork): not part of FlowAll, as it needs a
// backend with snapshots.
const FlowFork = "fork"

// forkOwner owns the fork flow's snapshot.
const forkOwner = "demo"

// forkModule is a module whose test fails: Abs returns its argument.
var forkModule = map[string]string{
	"go.mod": "module example.com/abs\n\ngo 1.22\n",
	"abs.go": "package abs\n\n// Abs returns the absolute value of x.\nfunc Abs(x int) int { return x }\n",
	"abs_test.go": `package abs

import "testing"

func TestAbs(t *testing.T) {
	for _, c := range []struct{ in, want int }{{2, 2}, {-2, 2}, {0, 0}} {
		if got := Abs(c.in); got != c.want {
			t.Errorf("Abs(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
`,
}

// forkFixes are the three fixes the forks try: one right, one wrong,
// one that does not build.
var forkFixes = []struct{ name, body string }{
	{"negate when negative", "func Abs(x int) int {\n\tif x < 0 {\n\t\treturn -x\n\t}\n\treturn x\n}\n"},
	{"always negate", "func Abs(x int) int { return -x }\n"},
	{"use math.Abs", "func Abs(x int) int { return math.Abs(x) }\n"},
}

// RunFork builds a module with a failing test once in sess's sandbox,
// snapshots it, forks it three ways in one call, applies a different fix
// in each fork, runs the test in the three at once and prints the
// results side by side. It expects the first fix to pass and the others
// to fail, and returns a *StageError otherwise.
func RunFork(ctx context.Context, sb goruntime.SnapshotBackend, sess *goruntime.Session, opts Options) error {
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 2 * time.Minute
	}
	out := opts.Out
	fmt.Fprintln(out, "=== fork flow: one failing test, three fixes side by side ===")
	var files []goruntime.File
	for p, c := range forkModule {
		files = append(files, goruntime.File{Path: "abs/" + p, Data: []byte(c)})
	}
	res, err := sess.Execute(ctx, goruntime.Request{Files: files, Command: "cd abs && go test ./...", Timeout: opts.StepTimeout})
	if err != nil {
		return &StageError{Flow: FlowFork, Command: "go test ./...", Err: err}
	}
	if res.Outcome != goruntime.OutcomeTestFailed {
		return &StageError{Flow: FlowFork, Command: "go test ./...", Err: fmt.Errorf("outcome %s, want test_failed: %s%s", res.Outcome, res.Stdout, res.Stderr)}
	}
	fmt.Fprintf(out, "-- go test ./... in %s: %s in %s --\n", sess.ID(), res.Outcome, res.Duration.Round(time.Millisecond))

	start := time.Now()
	snap, err := sb.Snapshot(ctx, forkOwner, sess.Sandbox(), goruntime.SnapshotSpec{TTL: time.Hour})
	if err != nil {
		return &StageError{Flow: FlowFork, Command: "snapshot", Err: err}
	}
	defer sb.DeleteSnapshot(context.WithoutCancel(ctx), forkOwner, snap.ID)
	fmt.Fprintf(out, "-- snapshot %s: %d bytes (%s) in %s --\n", snap.ID, snap.Bytes, snap.Method, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	forks, err := sb.Fork(ctx, forkOwner, sess.Sandbox(), goruntime.ForkSpec{Count: len(forkFixes)})
	if err != nil {
		return &StageError{Flow: FlowFork, Command: "fork", Err: err}
	}
	defer func() {
		for _, f := range forks {
			if f.Sandbox != nil {
				_ = f.Sandbox.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	fmt.Fprintf(out, "-- forked %d ways in %s --\n", len(forks), time.Since(start).Round(time.Millisecond))
	for i, f := range forks {
		if f.Err != nil {
			return &StageError{Flow: FlowFork, Command: fmt.Sprintf("fork %d", i+1), Err: f.Err}
		}
	}

	results := make([]*goruntime.Result, len(forks))
	errs := make([]error, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		wg.Go(func() {
			body := forkFixes[i].body
			if strings.Contains(body, "math.") {
				body = "import \"math\"\n\n" + body
			}
			src := "package abs\n\n" + body
			fs := goruntime.NewSession(f.Sandbox, goruntime.Options{})
			results[i], errs[i] = fs.Execute(ctx, goruntime.Request{Files: []goruntime.File{{Path: "abs/abs.go", Data: []byte(src)}},
				Command: "cd abs && go test ./...", Timeout: opts.StepTimeout})
		})
	}
	wg.Wait()

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fork\tsandbox\tfix\toutcome\ttime\tfirst line")
	for i, r := range results {
		if errs[i] != nil {
			return &StageError{Flow: FlowFork, Command: fmt.Sprintf("go test in fork %d", i+1), Err: errs[i]}
		}
		first, _, _ := strings.Cut(strings.TrimSpace(r.Stdout+r.Stderr), "\n")
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, forks[i].Sandbox.ID(), forkFixes[i].name, r.Outcome, r.Duration.Round(time.Millisecond), first)
	}
	tw.Flush()
	want := []goruntime.Outcome{goruntime.OutcomeOK, goruntime.OutcomeTestFailed, goruntime.OutcomeBuildFailed}
	for i, r := range results {
		if r.Outcome != want[i] {
			return &StageError{Flow: FlowFork, Command: fmt.Sprintf("go test in fork %d", i+1), Err: fmt.Errorf("outcome %s, want %s", r.Outcome, want[i])}
		}
	}
	// The original still holds the unfixed module.
	res, err = sess.Execute(ctx, goruntime.Request{Command: "cd abs && go test ./...", Timeout: opts.StepTimeout})
	if err != nil || res.Outcome != goruntime.OutcomeTestFailed {
		return &StageError{Flow: FlowFork, Command: "go test ./... in the original", Err: fmt.Errorf("outcome %v, %v; want test_failed (the forks' fixes leaked?)", outcomeOf(res), err)}
	}
	fmt.Fprintf(out, "-- the original %s still fails its test: the forks' fixes stayed in the forks --\n", sess.ID())
	fmt.Fprintln(out, "==> fork flow complete")
	return nil
}

func outcomeOf(r *goruntime.Result) goruntime.Outcome {
	if r == nil {
		return ""
	}
	return r.Outcome
}
