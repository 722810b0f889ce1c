package goruntime

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// TestRequest is one Session.Test call: go test over Packages with the
// go tool's JSON event stream as the source of per-test results.
type TestRequest struct {
	// Files are written under /app first, as for Execute.
	Files []File
	// Packages are go test's package arguments; default "./...".
	Packages []string
	// Run and Skip select tests (go test -run, -skip); Bench runs the
	// matching benchmarks (-bench), BenchTime sets -benchtime ("100x",
	// "1s").
	Run, Skip, Bench, BenchTime string
	// Cover adds -cover (Result.Coverage); Race adds -race (the race
	// detector: needs cgo, so CGO_ENABLED=1 is set, and a C compiler in
	// the sandbox); Short adds -short.
	Cover, Race, Short bool
	// Count is -count; 0 means 1 (run the tests, do not reuse cached
	// results).
	Count int
	// Args are more go test flags, each one argument (e.g. "-failfast",
	// "-timeout=30s"); they go before the packages.
	Args []string
	// Timeout, Env and GoVersion are as for Request.
	Timeout   time.Duration
	Env       map[string]string
	GoVersion string
}

// Command returns the shell command Test runs for r.
func (r TestRequest) Command() string {
	args := []string{"go", "test", "-json"}
	count := r.Count
	if count <= 0 {
		count = 1
	}
	args = append(args, "-count="+strconv.Itoa(count))
	for _, f := range []struct{ flag, v string }{{"-run", r.Run}, {"-skip", r.Skip}, {"-bench", r.Bench}, {"-benchtime", r.BenchTime}} {
		if f.v != "" {
			args = append(args, f.flag+"="+f.v)
		}
	}
	if r.Cover {
		args = append(args, "-cover")
	}
	if r.Race {
		args = append(args, "-race")
	}
	if r.Short {
		args = append(args, "-short")
	}
	args = append(args, r.Args...)
	pkgs := r.Packages
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	args = append(args, pkgs...)
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// Test runs go test with the JSON event stream and returns per-test
// results (Result.Tests, every test and subtest that ran, passed ones
// too), Benchmarks, Coverage and Diagnostics (build errors, go test's vet
// findings, failing tests' positions). Result.Stdout is the text of the
// event stream: what go test -v prints, with subtests' result lines in the
// order they finished rather than nested under their parent; build errors
// are in Stderr. Errors are as for Execute; a package argument starting
// with "-" is refused.
func (s *Session) Test(ctx context.Context, r TestRequest) (*Result, error) {
	for _, p := range r.Packages {
		if strings.HasPrefix(p, "-") {
			return nil, fmt.Errorf("test: package %q starts with \"-\": put flags in TestRequest.Args", p)
		}
	}
	env := r.Env
	if r.Race {
		if _, set := env["CGO_ENABLED"]; !set {
			env = maps.Clone(env)
			if env == nil {
				env = map[string]string{}
			}
			env["CGO_ENABLED"] = "1"
		}
	}
	return s.execute(ctx, Request{Files: r.Files, Command: r.Command(), Timeout: r.Timeout, Env: env, GoVersion: r.GoVersion, eventsAsText: true}, nil)
}
