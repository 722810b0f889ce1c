package goruntime

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/gotool"
)

// CheckRequest is one Session.Check call.
type CheckRequest struct {
	// Files are written under /app first, as for Execute.
	Files []File
	// Packages are the package patterns checked (go build, go vet);
	// default "./...". gofmt checks the directories they name ("./x/..."
	// checks ./x and below).
	Packages []string
	// Timeout bounds each of the three steps; zero means
	// Options.DefaultTimeout.
	Timeout time.Duration
}

// CheckResult is what Check found.
type CheckResult struct {
	// Diagnostics from gofmt (a file it would change: one per hunk, or a
	// syntax error), the compiler (go build of Packages, type errors in
	// test files as go vet reports them) and go vet's analyzers, sorted by
	// file and position; duplicates (a type error both go build and go vet
	// report) appear once, as compile.
	Diagnostics []Diagnostic
	// GofmtDiff is gofmt -d's unified diff of the files it would change;
	// empty when all are formatted.
	GofmtDiff string
	// Output is the raw stderr of each step, keyed "gofmt", "build", "vet".
	Output map[string]string
	// Duration is the wall time of the three steps.
	Duration time.Duration
}

// OK reports whether the check found nothing.
func (r *CheckResult) OK() bool { return len(r.Diagnostics) == 0 }

// Check reports gofmt differences, build errors and go vet findings for
// Packages without running any of the user's code: it runs gofmt -d -e,
// go build -o /dev/null (compiles, keeps no binary) and go vet, in that
// order, in the sandbox. Errors are as for Execute; a package pattern
// starting with "-" is refused.
func (s *Session) Check(ctx context.Context, r CheckRequest) (*CheckResult, error) {
	pkgs := r.Packages
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, "-") || p == "" {
			return nil, fmt.Errorf("check: package pattern %q: want a package path or a pattern such as ./... or ./cmd/app", p)
		}
	}
	if len(r.Files) > 0 {
		if _, err := s.Execute(ctx, Request{Files: r.Files}); err != nil {
			return nil, err
		}
	}
	quoted := make([]string, len(pkgs))
	for i, p := range pkgs {
		quoted[i] = ShellQuote(p)
	}
	list := strings.Join(quoted, " ")
	start := time.Now()
	res := &CheckResult{Output: map[string]string{}}
	steps := []struct {
		name, cmd string
	}{
		{"gofmt", "gofmt -d -e " + strings.Join(gofmtDirs(pkgs), " ")},
		{"build", "go build -o /dev/null " + list},
		{"vet", "go vet " + list},
	}
	var diags []Diagnostic
	for _, st := range steps {
		er, err := s.execRaw(ctx, st.cmd, r.Timeout)
		if err != nil {
			return nil, fmt.Errorf("check (%s): %w", st.name, err)
		}
		if er.TimedOut {
			return nil, fmt.Errorf("check (%s): timed out after %s", st.name, s.timeout(r.Timeout))
		}
		res.Output[st.name] = er.Stderr
		switch st.name {
		case "gofmt":
			res.GofmtDiff = er.Stdout
			diags = append(diags, gotool.ParseGofmtDiff(er.Stdout, WorkDir)...)
			diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceGofmt, WorkDir)...)
		case "build":
			diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceCompile, WorkDir)...)
		case "vet":
			diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceVet, WorkDir)...)
		}
	}
	res.Duration = time.Since(start)
	// A syntax error is reported by gofmt, go build and go vet alike: keep
	// the first (gofmt's, then the compiler's).
	res.Diagnostics = capDiagnostics(dedupe(diags))
	slices.SortStableFunc(res.Diagnostics, func(a, b Diagnostic) int {
		switch {
		case gotool.Less(a, b):
			return -1
		case gotool.Less(b, a):
			return 1
		}
		return 0
	})
	return res, nil
}

// gofmtDirs maps package patterns to what gofmt takes: the directory a
// relative pattern names ("./x/..." → ./x, gofmt recurses), "." for
// anything else (import paths).
func gofmtDirs(pkgs []string) []string {
	var dirs []string
	for _, p := range pkgs {
		d := "."
		if p == "." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") {
			d = path.Clean(strings.TrimSuffix(p, "..."))
		}
		if q := ShellQuote(d); !slices.Contains(dirs, q) {
			dirs = append(dirs, q)
		}
	}
	return dirs
}

// execRaw runs one command under the session's lock, without writing
// files or analysing output.
func (s *Session) execRaw(ctx context.Context, cmd string, timeout time.Duration) (*ExecResult, error) {
	s.run.Lock()
	defer s.run.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	timeout = s.timeout(timeout)
	// The backend bounds the call past the timeout (see Sandbox.Exec).
	return s.sb.Exec(ctx, ExecRequest{Command: cmd, Timeout: timeout})
}

func (s *Session) timeout(t time.Duration) time.Duration {
	if t <= 0 {
		return s.opts.DefaultTimeout
	}
	return t
}
