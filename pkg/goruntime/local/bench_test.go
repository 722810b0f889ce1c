package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// Run with: go test -run '^$' -bench . -benchtime 10x ./pkg/goruntime/local/
// Targets (issue 3): open p50 <= 100 ms; first go run in a fresh sandbox
// <= 0.5 s; warm rerun <= 1.3x bare host go run; 8 sandboxes at once.

func reportPercentiles(b *testing.B, ds []time.Duration, unit string) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-"+unit)
	b.ReportMetric(ms(ds[len(ds)*9/10]), "p90-"+unit)
}

// BenchmarkOpen measures Open without a warm pool (a start: the sandbox
// ready to serve); Close is not timed.
func BenchmarkOpen(b *testing.B) {
	be := newBackend(b, testOptions())
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		sb, err := be.Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportPercentiles(b, ds, "open-ms")
}

// BenchmarkOpenWarmPool measures Open with a warm pool of two (a claim):
// before each Open the pool gets up to 5 s to refill, as between an
// agent's sessions; Close is not timed. Target: p50 <= 10 ms.
func BenchmarkOpenWarmPool(b *testing.B) {
	opts := testOptions()
	opts.WarmPool = 2
	be := newBackend(b, opts)
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		b.StopTimer()
		for deadline := time.Now().Add(5 * time.Second); be.WarmPoolReady() < 2 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		sb, err := be.Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportPercentiles(b, ds, "open-ms")
}

var helloFiles = []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}

// BenchmarkFirstRun measures the first `go run main.go` in a fresh sandbox.
func BenchmarkFirstRun(b *testing.B) {
	be := newBackend(b, testOptions())
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		b.StopTimer()
		s, err := goruntime.Open(ctx, be, goruntime.Options{})
		if err != nil {
			b.Fatal(err)
		}
		mustOK(b, s, goruntime.Request{Files: helloFiles})
		b.StartTimer()
		start := time.Now()
		mustOK(b, s, goruntime.Request{Command: "go run main.go"})
		ds = append(ds, time.Since(start))
		b.StopTimer()
		s.Close(ctx)
		b.StartTimer()
	}
	reportPercentiles(b, ds, "first-run-ms")
}

// BenchmarkFirstVsWarm measures what issue 16 calls "the first run is a
// warm run": with the default warm pool, each iteration claims a fresh
// session and times its first `go build` of new code (files shipped in
// the same call), then times the same in a warm session that has built
// before. Before each timed build the pool gets up to 5 s to refill, as
// in an agent's pause between calls; Open and Close are not timed. Reports both
// p50s and their ratio (target: p50-ratio <= 1.2).
func BenchmarkFirstVsWarm(b *testing.B) {
	opts := testOptions()
	opts.WarmPool = local.DefaultWarmPool
	be := newBackend(b, opts)
	ctx := context.Background()
	warm := openSession(b, be)
	module := func(n int) []goruntime.File {
		return []goruntime.File{
			{Path: "go.mod", Data: []byte("module example.com/small\n\ngo 1.24\n")},
			{Path: "main.go", Data: fmt.Appendf(nil, "package main\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\nconst n = %d\n\nfunc main() { fmt.Println(n, strings.Fields(\"a b\")) }\n", n)},
		}
	}
	const build = "go build -o app ."
	mustOK(b, warm, goruntime.Request{Files: module(-1), Command: build, Timeout: 5 * time.Minute})
	// waitFull gives the pool up to 5 s to refill, as an agent's pause
	// would: the refill after a claim waits for the session's first
	// commands, and would otherwise run beside the timed warm build.
	waitFull := func() {
		for deadline := time.Now().Add(5 * time.Second); be.WarmPoolReady() < local.DefaultWarmPool && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	var first, warmed []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		waitFull()
		s, err := goruntime.Open(ctx, be, goruntime.Options{})
		if err != nil {
			b.Fatal(err)
		}
		n++
		b.StartTimer()
		start := time.Now()
		mustOK(b, s, goruntime.Request{Files: module(2 * n), Command: build, Timeout: 5 * time.Minute})
		first = append(first, time.Since(start))
		b.StopTimer()
		_ = s.Close(ctx)
		waitFull()
		b.StartTimer()
		start = time.Now()
		mustOK(b, warm, goruntime.Request{Files: module(2*n + 1), Command: build, Timeout: 5 * time.Minute})
		warmed = append(warmed, time.Since(start))
	}
	reportPercentiles(b, first, "first-ms")
	reportPercentiles(b, warmed, "warm-ms")
	if len(warmed) > 0 {
		b.ReportMetric(float64(first[len(first)/2])/float64(warmed[len(warmed)/2]), "p50-ratio")
	}
}

// BenchmarkWarmRunVsHost alternates a warm `go run main.go` in a sandbox
// with the same command on the bare host, and reports both and their ratio.
func BenchmarkWarmRunVsHost(b *testing.B) {
	be := newBackend(b, testOptions())
	ctx := context.Background()
	s := openSession(b, be)
	mustOK(b, s, goruntime.Request{Files: helloFiles, Command: "go run main.go"})

	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloMain), 0o644); err != nil {
		b.Fatal(err)
	}
	hostRun := func() time.Duration {
		start := time.Now()
		cmd := exec.Command("go", "run", "main.go")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("host go run: %v: %s", err, out)
		}
		return time.Since(start)
	}
	hostRun()
	var sandbox, host []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := s.Execute(ctx, goruntime.Request{Command: "go run main.go"}); err != nil {
			b.Fatal(err)
		}
		sandbox = append(sandbox, time.Since(start))
		host = append(host, hostRun())
	}
	reportPercentiles(b, sandbox, "sandbox-ms")
	reportPercentiles(b, host, "host-ms")
	if len(host) > 0 {
		b.ReportMetric(float64(sandbox[len(sandbox)/2])/float64(host[len(host)/2]), "p50-ratio")
	}
}

// BenchmarkEightAtOnce opens 8 sandboxes and runs hello world in all of
// them at once; every one must succeed.
func BenchmarkEightAtOnce(b *testing.B) {
	be := newBackend(b, testOptions())
	ctx := context.Background()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := goruntime.Open(ctx, be, goruntime.Options{})
				if err != nil {
					errs <- err
					return
				}
				defer s.Close(ctx)
				res, err := s.Execute(ctx, goruntime.Request{Files: helloFiles, Command: "go run main.go", Timeout: 5 * time.Minute})
				if err == nil && res.Outcome != goruntime.OutcomeOK {
					err = &runError{res}
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

type runError struct{ res *goruntime.Result }

func (e *runError) Error() string { return "outcome " + string(e.res.Outcome) + ": " + e.res.Stderr }
