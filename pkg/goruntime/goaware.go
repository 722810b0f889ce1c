package goruntime

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/modfile"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/gotool"
)

// The Go-aware results, declared in package gotool (which parses the go
// command's output) and named here so callers need one import.
type (
	// Diagnostic is one compiler, vet, gofmt or test finding at a file
	// position; File is relative to /app.
	Diagnostic = gotool.Diagnostic
	// DiagnosticSource names the tool behind a Diagnostic.
	DiagnosticSource = gotool.Source
	// TestResult is one test or subtest of a go test run.
	TestResult = gotool.TestResult
	// TestStatus is pass, fail or skip.
	TestStatus = gotool.TestStatus
	// Benchmark is one parsed benchmark result line.
	Benchmark = gotool.Benchmark
	// Coverage is one package's statement coverage.
	Coverage = gotool.Coverage
)

// Diagnostic sources and test statuses, see package gotool.
const (
	SourceCompile = gotool.SourceCompile
	SourceVet     = gotool.SourceVet
	SourceGofmt   = gotool.SourceGofmt
	SourceTest    = gotool.SourceTest

	TestPass = gotool.TestPass
	TestFail = gotool.TestFail
	TestSkip = gotool.TestSkip
)

// WorkDir is the directory commands run in inside every sandbox;
// diagnostics' paths are relative to it.
const WorkDir = "/app"

// Caps on the Go-aware fields of one Result, so a run printing thousands
// of errors or tests cannot blow up a caller's memory or an MCP reply.
const (
	maxDiagnostics  = 500
	maxTests        = 2000
	maxTestOutput   = 4 << 10 // head and tail of each test's Output, each
	test2jsonTimout = time.Minute
)

var (
	gofmtDiffRE = regexp.MustCompile(`(?:^|[\s;&|(])gofmt\s+(?:-\S+\s+)*-[a-z]*d`)
	goVetRE     = regexp.MustCompile(`(?:^|[\s;&|(])(?:\S*/)?go\s+vet(?:\s|$)`)
)

// analyze fills res's Go-aware fields from the command's whole output.
// What it cannot work out (test2json failing, go.mod unreadable) it logs
// and leaves out: the run's own result stands.
func (s *Session) analyze(ctx context.Context, req Request, er *ExecResult, res *Result) {
	command := req.Command
	if !usesGoTool(command) && !strings.Contains(command, "gofmt") {
		return
	}
	var diags []Diagnostic
	if gofmtDiffRE.MatchString(command) {
		diags = append(diags, gotool.ParseGofmtDiff(er.Stdout, WorkDir)...)
	}
	isTest := gotool.IsGoTest(command)
	if isTest {
		rep := s.analyzeTests(ctx, er, res)
		if req.eventsAsText && rep != nil && rep.Events > 0 {
			// Session.Test: the caller asked for results, not JSON.
			er.Stdout = rep.Text
			er.Stderr = rep.BuildOutput + er.Stderr
		}
		diags = append(diags, res.Diagnostics...)
		for _, t := range res.Tests {
			if t.Status == TestFail {
				diags = append(diags, gotool.TestDiagnostics(res.Tests, s.packageDirs(ctx))...)
				break
			}
		}
	}
	// stderr holds the go tool's findings when it says the build failed,
	// and for go vet, gofmt and go test (whose test binaries write to
	// stdout). A program's own stderr (go run whose program failed) is
	// not parsed: its log lines can look like findings.
	switch {
	case res.Outcome == OutcomeBuildFailed, isTest && er.ExitCode != 0:
		diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceCompile, WorkDir)...)
	case goVetRE.MatchString(command) && er.ExitCode != 0:
		diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceVet, WorkDir)...)
	case strings.Contains(command, "gofmt") && er.ExitCode != 0:
		diags = append(diags, gotool.ParseBuildOutput(er.Stderr, SourceGofmt, WorkDir)...)
	}
	res.Diagnostics = capDiagnostics(dedupe(diags))
}

// analyzeTests fills Tests, Benchmarks and Coverage of a go test run: from
// its stdout when that is already the JSON event stream (-json), else by
// running the go tool's test2json over each package's text inside the
// sandbox (the conversion never sees the host).
func (s *Session) analyzeTests(ctx context.Context, er *ExecResult, res *Result) *gotool.TestReport {
	var rep *gotool.TestReport
	if gotool.LooksLikeTestEvents(er.Stdout) {
		rep = gotool.ParseTestEvents([]byte(er.Stdout))
	} else {
		parts := gotool.SplitTestOutput(er.Stdout)
		if len(parts) == 0 {
			return nil
		}
		stream, err := s.test2json(ctx, parts)
		if err != nil {
			s.opts.Logger.WarnContext(ctx, "per-test results unavailable", "sandbox", s.sb.ID(), "err", err)
			return nil
		}
		rep = gotool.ParseTestEvents(stream)
	}
	s.setTestReport(rep, res)
	return rep
}

func (s *Session) setTestReport(rep *gotool.TestReport, res *Result) {
	tests := rep.Tests
	if len(tests) > maxTests {
		tests = tests[:maxTests]
	}
	for i := range tests {
		tests[i].Output, _ = HeadTail(tests[i].Output, maxTestOutput, maxTestOutput)
	}
	res.Tests = tests
	res.Benchmarks = rep.Benchmarks
	res.Coverage = rep.Coverage
	if rep.BuildOutput != "" {
		res.Diagnostics = append(res.Diagnostics, gotool.ParseBuildOutput(rep.BuildOutput, SourceCompile, WorkDir)...)
	}
}

// Test2jsonEnv names the environment variable through which a backend
// gives its sandboxes a prebuilt test2json (a build of cmd/test2json of
// the sandbox's Go), which the conversion of go test's text runs when it
// is executable there. The local backend points it into its seed build
// cache, built once per machine and read-only to every sandbox, so a
// fresh sandbox's first plain `go test` builds nothing for its per-test
// results. It converts what the sandbox's own tests printed and nothing
// else: a sandbox that changes the variable or what it names (in its own
// view) only misreports its own results, as it could by printing them.
const Test2jsonEnv = "GORUNTIME_TEST2JSON"

// test2jsonBin is where test2json converts go test's text when the
// sandbox has none from its backend (Test2jsonEnv): a build of
// cmd/test2json the sandbox keeps. `go tool test2json` would do, but
// since Go 1.24 test2json is built on demand and each `go tool` run checks
// that build first: ~90 ms of CPU per call, against ~5 ms to run the
// binary. Built once per sandbox (~350 ms: `go build` links it, as it
// never takes a linked program from the build cache), to a temporary name
// then renamed, so a call never runs a half-written one; a sandbox where
// it cannot be built (or whose commands removed it and cannot rebuild it)
// falls back to `go tool test2json`.
const test2jsonBin = `"$HOME/.cache/go-runtime-sandbox/test2json"`

// inlineTest2jsonMax bounds the text test2json takes inside its command
// (test2jsonInline): more is uploaded first, as an archive.
const inlineTest2jsonMax = 1 << 20

// test2json converts go test's text, one piece per package, into the JSON
// event stream with test2json -p <package> (the backend's, Test2jsonEnv,
// else test2jsonBin), run in the sandbox. The text goes in the command
// itself, one request (test2jsonInline), unless it cannot travel there
// unchanged; then it is uploaded first and unpacked into a private
// temporary directory.
func (s *Session) test2json(ctx context.Context, parts []gotool.PackageOutput) ([]byte, error) {
	// From a directory of no module's (a go.mod in /app, even a broken
	// one, must not reach the build or go tool): the temporary one the
	// text is unpacked into, or /.
	var b strings.Builder
	inline, ok := test2jsonInline(parts)
	if ok {
		b.WriteString("cd / || exit 1")
	} else {
		files := make([]File, len(parts))
		for i, p := range parts {
			files[i] = File{Path: fmt.Sprintf("part%d", i), Data: []byte(p.Text)}
		}
		archive, err := Archive(files)
		if err != nil {
			return nil, err
		}
		name := ".goruntime-test2json-" + randomHex(8) + ".tar"
		if err := s.sb.WriteFile(ctx, name, strings.NewReader(string(archive))); err != nil {
			return nil, fmt.Errorf("upload go test output: %w", err)
		}
		fmt.Fprintf(&b, `d=$(mktemp -d) || exit 1; tar -xf %s -C "$d"; rc=$?; rm -f %s; [ $rc = 0 ] || exit $rc; cd "$d" || exit 1`, name, name)
	}
	fmt.Fprintf(&b, "\nt=%s; if [ -x \"${%s:-}\" ]; then t=$%s; elif [ ! -x \"$t\" ]; then mkdir -p \"${t%%/*}\" && go build -o \"$t.$$\" cmd/test2json >/dev/null 2>&1 && mv -f \"$t.$$\" \"$t\"; rm -f \"$t.$$\"; fi", test2jsonBin, Test2jsonEnv, Test2jsonEnv)
	b.WriteString("\nj() { if [ -x \"$t\" ]; then \"$t\" \"$@\"; else go tool test2json \"$@\"; fi; }\nrc=0")
	if ok {
		b.WriteString(inline)
		b.WriteString("\nexit $rc")
	} else {
		for i, p := range parts {
			fmt.Fprintf(&b, "\nj -p %s < part%d || rc=$?", ShellQuote(p.Package), i)
		}
		b.WriteString("\ncd / && rm -rf \"$d\"; exit $rc")
	}
	er, err := s.sb.Exec(ctx, ExecRequest{Command: b.String(), Timeout: test2jsonTimout})
	if err != nil {
		return nil, fmt.Errorf("go tool test2json: %w", err)
	}
	if er.ExitCode != 0 {
		return nil, fmt.Errorf("go tool test2json: exit %d: %s", er.ExitCode, clip.String(er.Stderr, 300))
	}
	return []byte(er.Stdout), nil
}

// test2jsonInline returns the lines that feed each package's text to
// test2json as a here-document of the command itself: one request and
// one process per package, where an upload, an archive and its unpacking
// cost a second request and four more processes (~4 ms on a 2-CPU VM, of
// a warm go test's ~370). It reports false when a text could not travel
// in the command unchanged: bytes the request's JSON would alter (not
// UTF-8) or the server refuses (NUL), a last line without its newline
// (a here-document adds one), or more than inlineTest2jsonMax in all.
func test2jsonInline(parts []gotool.PackageOutput) (string, bool) {
	total := 0
	for _, p := range parts {
		total += len(p.Text)
		if total > inlineTest2jsonMax || !strings.HasSuffix(p.Text, "\n") || !utf8.ValidString(p.Text) || strings.IndexByte(p.Text, 0) >= 0 {
			return "", false
		}
	}
	var b strings.Builder
	for _, p := range parts {
		// A delimiter no line of the text is: the here-document ends at
		// its own last line and nowhere before.
		eof := "GORUNTIME_TEST2JSON_EOF_" + randomHex(8)
		for strings.Contains("\n"+p.Text, "\n"+eof+"\n") {
			eof = "GORUNTIME_TEST2JSON_EOF_" + randomHex(8)
		}
		fmt.Fprintf(&b, "\nj -p %s <<'%s' || rc=$?\n%s%s", ShellQuote(p.Package), eof, p.Text, eof)
	}
	return b.String(), true
}

// packageDirs returns a mapping from import path to directory relative to
// /app, from /app/go.mod's module path; nil when there is none.
func (s *Session) packageDirs(ctx context.Context) func(string) string {
	data, err := s.sb.ReadFile(ctx, "go.mod")
	if err != nil {
		return nil
	}
	mod := modfile.ModulePath(data)
	return func(pkg string) string { return gotool.DirOfPackage(mod, pkg) }
}

func dedupe(ds []Diagnostic) []Diagnostic {
	type key struct {
		file         string
		line, column int
		message      string
	}
	seen := map[key]bool{}
	out := ds[:0]
	for _, d := range ds {
		k := key{d.File, d.Line, d.Column, d.Message}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}

func capDiagnostics(ds []Diagnostic) []Diagnostic {
	if len(ds) > maxDiagnostics {
		return ds[:maxDiagnostics]
	}
	return ds
}

// raceRE finds the race detector flag in a go command line.
var raceRE = regexp.MustCompile(`(?:^|\s)-race(?:=true)?(?:\s|$)`)

// raceEnv turns cgo on for a command using the race detector (which
// needs it; sandboxes build with CGO_ENABLED=0 by default) unless env
// sets CGO_ENABLED itself.
func raceEnv(command string, env map[string]string) map[string]string {
	if _, set := env["CGO_ENABLED"]; set || !usesGoTool(command) || !raceRE.MatchString(command) {
		return env
	}
	out := make(map[string]string, len(env)+1)
	maps.Copy(out, env)
	out["CGO_ENABLED"] = "1"
	return out
}

// ShellQuote quotes s as one word for /bin/sh.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
