package corpus

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// WorkDir is the sandbox's work directory; the oracle's directory is
// rewritten to it before comparing.
const WorkDir = "/app"

var (
	// "--- PASS: TestX (0.00s)", "    --- FAIL: TestX/sub (1.20s)".
	testElapsedRE = regexp.MustCompile(`(?m)^(\s*--- (?:PASS|FAIL|SKIP): .*) \(\d+(?:\.\d+)?s\)$`)
	// go test's package lines: "ok  \tpkg\t0.003s", "ok  \tpkg\t(cached)",
	// "FAIL\tpkg\t0.004s"; optional trailing text (coverage) is kept.
	pkgElapsedRE = regexp.MustCompile(`(?m)^(ok  |FAIL)(\t\S+\t)(\d+(\.\d+)?s|\(cached\))`)
	// "BenchmarkFib-2   \t     1\t      2345 ns/op\t 16 B/op\t 1 allocs/op".
	benchRE = regexp.MustCompile(`(?m)^(Benchmark\S+?)(-\d+)?[ \t]+\d+[ \t]+\d.*$`)
	// The go command's scratch directories.
	goBuildTmpRE = regexp.MustCompile(`/tmp/go-build\d+`)
	// Pointers and heap addresses in tracebacks ("main.f({0xc000012345, ...})",
	// "[signal SIGSEGV ... pc=0x49e187]"); short code offsets (+0x1d) stay.
	addressRE = regexp.MustCompile(`0x[0-9a-f]{6,}`)
	// Goroutine IDs in tracebacks depend on what else the runtime started.
	goroutineRE = regexp.MustCompile(`(?m)(^goroutine|in goroutine) \d+\b`)
	// A note the sandbox appends to the go command's stderr (the local
	// backend's hint about its missing network), with its blank line.
	sandboxNoteRE = regexp.MustCompile(`(?m)\n?^\[go-runtime-sandbox: [^\n]*\]\n?`)
)

// Normalize rewrites what legitimately differs between two runs of the same
// program: hostDir (the oracle's directory, "" for a sandbox run) becomes
// /app, go test's timings and (cached) become "T", benchmark measurement
// lines keep only the benchmark's name, go's scratch directories become
// $WORK, hex addresses of six or more digits become 0xADDR, goroutine IDs
// become N, and notes the sandbox adds ("[go-runtime-sandbox: ...]" lines)
// are dropped.
func Normalize(s, hostDir string) string {
	if hostDir != "" {
		s = strings.ReplaceAll(s, hostDir, WorkDir)
	}
	s = testElapsedRE.ReplaceAllString(s, "${1} (T)")
	s = pkgElapsedRE.ReplaceAllString(s, "${1}${2}T")
	s = benchRE.ReplaceAllString(s, "${1} <measurements>")
	s = goBuildTmpRE.ReplaceAllString(s, "$$WORK")
	s = addressRE.ReplaceAllString(s, "0xADDR")
	s = goroutineRE.ReplaceAllString(s, "${1} N")
	s = sandboxNoteRE.ReplaceAllString(s, "")
	return s
}

// Mismatch is one way a sandbox run differed from the oracle or the oracle
// from its spec.
type Mismatch struct {
	What   string // "stdout", "stderr", "exit code", "outcome", "oracle exit code", ...
	Detail string // human-readable, with a diff for streams
}

func (m Mismatch) String() string { return m.What + ": " + m.Detail }

// CheckOracle compares the oracle's run with what c's spec documents.
func CheckOracle(c Case, oracle Observed) []Mismatch {
	var ms []Mismatch
	if oracle.ExitCode != c.WantExit {
		ms = append(ms, Mismatch{"oracle exit code", fmt.Sprintf("spec says %d, the host gave %d", c.WantExit, oracle.ExitCode)})
	}
	if oracle.Outcome != c.WantOutcome {
		ms = append(ms, Mismatch{"oracle outcome", fmt.Sprintf("spec says %s, the host gave %s", c.WantOutcome, oracle.Outcome)})
	}
	return ms
}

// Compare reports how the sandbox run got differs from the oracle's run
// want: exit code, outcome, stdout and (when c.CompareStderr) stderr, the
// streams after Normalize. hostDir is the directory the oracle ran in.
func Compare(c Case, want Observed, hostDir string, got Observed) []Mismatch {
	var ms []Mismatch
	if got.ExitCode != want.ExitCode {
		ms = append(ms, Mismatch{"exit code", fmt.Sprintf("host %d, sandbox %d", want.ExitCode, got.ExitCode)})
	}
	if got.Outcome != want.Outcome {
		ms = append(ms, Mismatch{"outcome", fmt.Sprintf("host %s, sandbox %s", want.Outcome, got.Outcome)})
	}
	if d := Diff(Normalize(want.Stdout, hostDir), Normalize(got.Stdout, "")); d != "" {
		ms = append(ms, Mismatch{"stdout", d})
	}
	if c.CompareStderr {
		if d := Diff(Normalize(want.Stderr, hostDir), Normalize(got.Stderr, "")); d != "" {
			ms = append(ms, Mismatch{"stderr", d})
		}
	}
	return append(ms, CompareGoAware(c, got)...)
}

// CompareGoAware checks the sandbox run's Go-aware results against what
// c's spec wants (diagnostic:, test:, benchmark: lines).
func CompareGoAware(c Case, got Observed) []Mismatch {
	var ms []Mismatch
	for _, w := range c.WantDiagnostics {
		pos, src, _ := strings.Cut(w, " ")
		parts := strings.Split(pos, ":")
		found := slices.ContainsFunc(got.Diagnostics, func(d goruntime.Diagnostic) bool {
			if d.File != parts[0] || string(d.Source) != src || strconv.Itoa(d.Line) != parts[1] {
				return false
			}
			return len(parts) < 3 || parts[2] == "0" || strconv.Itoa(d.Column) == parts[2]
		})
		if !found {
			ms = append(ms, Mismatch{"diagnostics", fmt.Sprintf("no %s; got %v", w, got.Diagnostics)})
		}
	}
	for _, w := range c.WantTests {
		name, status, _ := strings.Cut(w, " ")
		if !slices.ContainsFunc(got.Tests, func(t goruntime.TestResult) bool { return t.Name == name && string(t.Status) == status }) {
			var have []string
			for _, t := range got.Tests {
				have = append(have, t.Name+" "+string(t.Status))
			}
			ms = append(ms, Mismatch{"tests", fmt.Sprintf("no %s; got %q", w, have)})
		}
	}
	for _, w := range c.WantBenchmarks {
		if !slices.ContainsFunc(got.Benchmarks, func(b goruntime.Benchmark) bool { return b.Name == w && b.NsPerOp > 0 }) {
			ms = append(ms, Mismatch{"benchmarks", fmt.Sprintf("no %s with ns/op; got %+v", w, got.Benchmarks)})
		}
	}
	return ms
}

// diffContext is how many equal lines Diff shows around the first
// difference.
const diffContext = 3

// Diff returns "" when host and sandbox are equal, else a description of
// where they first differ: the line number and up to diffContext lines
// around it from each side, quoted so invisible differences (trailing
// spaces, a missing final newline, U+FFFD) show.
func Diff(host, sandbox string) string {
	if host == sandbox {
		return ""
	}
	hl, sl := splitLines(host), splitLines(sandbox)
	i := 0
	for i < len(hl) && i < len(sl) && hl[i] == sl[i] {
		i++
	}
	from := max(i-diffContext, 0)
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (host %d lines/%d bytes, sandbox %d lines/%d bytes)\n",
		i+1, len(hl), len(host), len(sl), len(sandbox))
	side := func(name string, lines []string) {
		fmt.Fprintf(&b, "  %s:\n", name)
		to := min(i+diffContext+1, len(lines))
		for j := from; j < to; j++ {
			mark := " "
			if j == i {
				mark = ">"
			}
			fmt.Fprintf(&b, "   %s%4d %q\n", mark, j+1, lines[j])
		}
		if i >= len(lines) {
			fmt.Fprintf(&b, "   >     (ends after line %d)\n", len(lines))
		}
	}
	side("host", hl)
	side("sandbox", sl)
	return strings.TrimRight(b.String(), "\n")
}

// splitLines splits s after each newline, keeping the newlines so a missing
// final newline is a visible difference.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
