package demo

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

//go:embed testdata
var sources embed.FS

// Flow names accepted by Run.
const (
	FlowAll   = "all"
	FlowSmoke = "smoke"
	FlowMulti = "multi"
)

// Executor is the part of goruntime.Session the flows use.
type Executor interface {
	ExecuteStream(ctx context.Context, req goruntime.Request, onChunk func(goruntime.Chunk)) (*goruntime.Result, error)
}

// DefaultStepTimeout bounds a step's command unless told otherwise. The
// first step on a new machine compiles the standard library in its
// sandbox while the seed build cache builds beside it: ~15 s on a quiet
// 2-core machine, over 2 minutes at a load average of 50-70 (a make demo
// of a fresh clone, 2026-12-07).
const DefaultStepTimeout = 10 * time.Minute

// Options tune Run.
type Options struct {
	// Out receives the flows' report: section banners, one
	// "-- <command> [exit=N] --" header per step followed by its output.
	Out io.Writer
	// Live prints output as the command produces it (header first, exit
	// code after) instead of the buffered "-- cmd [exit=N] --" blocks.
	Live bool
	// StepTimeout bounds each step's command; zero means
	// DefaultStepTimeout.
	StepTimeout time.Duration
	// Still is how often a step that is still running says so, one line
	// with its time so far, so that no step is silent for long (the first
	// build on a new machine compiles the standard library: a minute or
	// more on a busy one); zero means 5 s.
	Still time.Duration
}

// StageError reports which step of which flow failed, and why.
type StageError struct {
	Flow, Command string
	Err           error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("%s flow, step %q: %v", e.Flow, e.Command, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

type step struct {
	command  string   // what the user sees and what runs, in the flow's directory
	want     []string // substrings the combined output must contain
	wantExit int      // the exit code the step must end with (a failing build shows diagnostics)
	wantDiag string   // "file:line" a diagnostic of the result must have
	wantTest string   // a test the result must list as passed
}

type flow struct {
	name   string // "smoke" or "multi"
	banner string
	dir    string // directory under /app and under testdata
	steps  []step
}

func flows() []flow {
	return []flow{
		{
			name:   FlowSmoke,
			banner: "=== single-file smoke flow ===",
			dir:    "smoke",
			steps: []step{
				{command: "go run main.go", want: []string{"sum(1..100)=5050", "go=go1."}},
				{command: "go build -o app main.go"},
				{command: "./app", want: []string{"sum(1..100)=5050"}},
			},
		},
		{
			name:   FlowMulti,
			banner: "=== multi-file module flow ===",
			dir:    "multi",
			steps: []step{
				// "go build -o app ./..." is refused by the go command when
				// ./... holds more than one package, so build the tree and
				// then the binary.
				{command: "go build ./... && go build -o app ."},
				{command: "./app", want: []string{"Hello, Alice!", "Hello, Bob!", "Hello, Carol!"}},
				{command: "go test -v ./...", want: []string{"ok  \texample.com/hello/greet"}, wantTest: "TestHello"},
				// A type error: the result lists it as a diagnostic with
				// its position (relative to the directory go ran in).
				{command: `printf 'package greet\n\nfunc Broken() int { return "x" }\n' > greet/broken.go && go build ./...; rc=$?; rm -f greet/broken.go; exit $rc`,
					wantExit: 1, wantDiag: "greet/broken.go:3"},
			},
		},
	}
}

// CheckFlow reports whether which names a flow Run accepts.
func CheckFlow(which string) error {
	switch which {
	case FlowAll, FlowSmoke, FlowMulti, FlowFork:
		return nil
	}
	return fmt.Errorf("unknown flow %q: want all, smoke, multi or fork", which)
}

// Run runs the named flow ("all", "smoke" or "multi") in one session and
// prints "==> PoC complete" when every step passed. Errors are *StageError
// naming the failed step.
func Run(ctx context.Context, ex Executor, which string, opts Options) error {
	if err := CheckFlow(which); err != nil {
		return err
	}
	if which == FlowFork {
		return fmt.Errorf("the fork flow needs a backend with snapshots: RunFork")
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = DefaultStepTimeout
	}
	if opts.Still <= 0 {
		opts.Still = 5 * time.Second
	}
	opts.Out = &syncWriter{w: opts.Out} // steps' output and stillRunning's lines
	var selected []flow
	for _, f := range flows() {
		if which == FlowAll || which == f.name {
			selected = append(selected, f)
		}
	}
	for _, f := range selected {
		if err := runFlow(ctx, ex, f, opts); err != nil {
			return err
		}
	}
	fmt.Fprintln(opts.Out, "==> PoC complete")
	return nil
}

func runFlow(ctx context.Context, ex Executor, f flow, opts Options) error {
	fmt.Fprintln(opts.Out, f.banner)
	files, err := flowFiles(f.dir)
	if err != nil {
		return &StageError{Flow: f.name, Command: "load sources", Err: err}
	}
	for i, s := range f.steps {
		req := goruntime.Request{
			Command: "cd " + f.dir + " && " + s.command,
			Timeout: opts.StepTimeout,
		}
		if i == 0 {
			req.Files = files // the whole flow's sources travel in one archive
		}
		var onChunk func(goruntime.Chunk)
		if opts.Live {
			fmt.Fprintf(opts.Out, "-- %s --\n", s.command)
			onChunk = func(c goruntime.Chunk) { _, _ = opts.Out.Write(c.Data) }
		}
		stop := stillRunning(opts.Out, s.command, opts.Still)
		res, err := ex.ExecuteStream(ctx, req, onChunk)
		stop()
		if err != nil {
			return &StageError{Flow: f.name, Command: s.command, Err: err}
		}
		if opts.Live {
			fmt.Fprintf(opts.Out, "[exit=%d]\n", res.ExitCode)
		} else {
			fmt.Fprintf(opts.Out, "-- %s [exit=%d] --\n", s.command, res.ExitCode)
			writeOutput(opts.Out, res.Stdout)
			writeOutput(opts.Out, res.Stderr)
		}
		printGoAware(opts.Out, res)
		if res.ExitCode != s.wantExit {
			return &StageError{Flow: f.name, Command: s.command,
				Err: fmt.Errorf("exit code %d (outcome %s)", res.ExitCode, res.Outcome)}
		}
		if s.wantDiag != "" && !slices.ContainsFunc(res.Diagnostics, func(d goruntime.Diagnostic) bool {
			return fmt.Sprintf("%s:%d", d.File, d.Line) == s.wantDiag
		}) {
			return &StageError{Flow: f.name, Command: s.command, Err: fmt.Errorf("no diagnostic at %s in %v", s.wantDiag, res.Diagnostics)}
		}
		if s.wantTest != "" && !slices.ContainsFunc(res.Tests, func(t goruntime.TestResult) bool {
			return t.Name == s.wantTest && t.Status == goruntime.TestPass
		}) {
			return &StageError{Flow: f.name, Command: s.command, Err: fmt.Errorf("test %s not reported as passed in %v", s.wantTest, res.Tests)}
		}
		out := res.Stdout + res.Stderr
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				return &StageError{Flow: f.name, Command: s.command, Err: fmt.Errorf("output lacks %q", w)}
			}
		}
	}
	return nil
}

// stillRunning prints a line to w every every until stop is called,
// saying command still runs and for how long; stop returns once it
// prints no more.
func stillRunning(w io.Writer, command string, every time.Duration) (stop func()) {
	start := time.Now()
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "   still running `%s`: %s\n", command, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-ended }
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// printGoAware prints the result's diagnostics and per-test results.
func printGoAware(w io.Writer, res *goruntime.Result) {
	for _, d := range res.Diagnostics {
		msg, _, _ := strings.Cut(d.Message, "\n")
		fmt.Fprintf(w, "   diagnostic [%s] %s:%d:%d: %s\n", d.Source, d.File, d.Line, d.Column, msg)
	}
	for _, t := range res.Tests {
		fmt.Fprintf(w, "   test %-4s %s %s (%d ms)\n", strings.ToUpper(string(t.Status)), t.Package, t.Name, t.Elapsed.Milliseconds())
	}
}

func writeOutput(w io.Writer, s string) {
	if s == "" {
		return
	}
	io.WriteString(w, s)
	if !strings.HasSuffix(s, "\n") {
		io.WriteString(w, "\n")
	}
}

// flowFiles loads testdata/<dir> as files under <dir>/ in the sandbox.
// go.mod is stored as go.mod.txt so the embedded tree is not a nested module.
func flowFiles(dir string) ([]goruntime.File, error) {
	root := "testdata/" + dir
	var files []goruntime.File
	err := fs.WalkDir(sources, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "testdata/")
		if path.Base(rel) == "go.mod.txt" {
			rel = path.Join(path.Dir(rel), "go.mod")
		}
		files = append(files, goruntime.File{Path: rel, Data: data, Mode: 0o644})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded %s sources: %w", dir, err)
	}
	return files, nil
}
