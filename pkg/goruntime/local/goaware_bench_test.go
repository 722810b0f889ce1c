package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Go-aware benchmarks, each side by side with its host baseline in the
// same loop, reporting the ratio:
//
//	go test -run '^$' -bench GoAware -benchtime 3x ./pkg/goruntime/local/

// hostRun runs the host's go in dir with the sandbox's go settings.
func hostRun(b *testing.B, dir string, env []string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off"), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil && len(out) == 0 {
		b.Fatalf("host go %v: %v", args, err)
	}
	return d
}

func writeHost(b *testing.B, fs []goruntime.File) string {
	b.Helper()
	dir := b.TempDir()
	for _, f := range fs {
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkGoAwareRaceFirstRun: the first go test -race in a fresh
// sandbox (opened each iteration, extra seed ready) against the host's
// warm go test -race of the same package.
func BenchmarkGoAwareRaceFirstRun(b *testing.B) {
	if _, err := exec.LookPath("gcc"); err != nil {
		b.Skip("no gcc: the race detector needs cgo")
	}
	be := newBackend(b, testOptions())
	ctx := context.Background()
	if err := be.PrepareExtra(ctx); err != nil {
		b.Fatal(err)
	}
	fs := files("go.mod", nestedGoMod, "racy/racy_test.go", racyTest)
	dir := writeHost(b, fs)
	cgo := []string{"CGO_ENABLED=1"}
	hostRun(b, dir, cgo, "test", "-race", "-count=1", "./...") // warm the host cache
	var sandbox, host time.Duration
	b.ResetTimer()
	for range b.N {
		s, err := goruntime.Open(ctx, be, goruntime.Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := s.Test(ctx, goruntime.TestRequest{Files: fs, Race: true, Timeout: 10 * time.Minute})
		sandbox += time.Since(start)
		if err != nil || findTest(res.Tests, "TestRace") == nil {
			b.Fatalf("race run: %v %+v", err, res)
		}
		_ = s.Close(ctx)
		host += hostRun(b, dir, cgo, "test", "-race", "-count=1", "./...")
	}
	n := float64(b.N)
	b.ReportMetric(sandbox.Seconds()*1000/n, "sandbox-ms/op")
	b.ReportMetric(host.Seconds()*1000/n, "host-warm-ms/op")
	b.ReportMetric(sandbox.Seconds()/host.Seconds(), "ratio")
}

// BenchmarkGoAwareCheckVsVet: Session.Check (gofmt + go build + go vet in
// a warm sandbox) against the host's go vet of the same module.
func BenchmarkGoAwareCheckVsVet(b *testing.B) {
	be := newBackend(b, testOptions())
	s := openSession(b, be)
	ctx := context.Background()
	fs := files("go.mod", nestedGoMod,
		"cmd/app/main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/internal/calc\"\n)\n\nfunc main() { fmt.Printf(\"%d\\n\", calc.Add(1, 2)) }\n",
		"internal/calc/calc.go", "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"internal/calc/calc_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n")
	if _, err := s.Check(ctx, goruntime.CheckRequest{Files: fs}); err != nil { // warm
		b.Fatal(err)
	}
	dir := writeHost(b, fs)
	hostRun(b, dir, nil, "vet", "./...")
	var sandbox, host time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := s.Check(ctx, goruntime.CheckRequest{})
		sandbox += time.Since(start)
		if err != nil || !res.OK() {
			b.Fatalf("check: %v %+v", err, res)
		}
		host += hostRun(b, dir, nil, "vet", "./...")
	}
	n := float64(b.N)
	b.ReportMetric(sandbox.Seconds()*1000/n, "check-ms/op")
	b.ReportMetric(host.Seconds()*1000/n, "host-vet-ms/op")
	b.ReportMetric(sandbox.Seconds()/host.Seconds(), "ratio")
}
