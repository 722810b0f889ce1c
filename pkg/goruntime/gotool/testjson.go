package gotool

import (
	"bytes"
	"encoding/json"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TestEvent is one record of the go tool's test event stream, as
// `go test -json` and `go tool test2json` print it (see `go doc
// test2json`), including the build events go test -json adds
// (Action "build-output"/"build-fail", keyed by ImportPath).
type TestEvent struct {
	Time        time.Time `json:",omitempty"`
	Action      string
	Package     string  `json:",omitempty"`
	Test        string  `json:",omitempty"`
	Elapsed     float64 `json:",omitempty"` // seconds
	Output      string  `json:",omitempty"`
	FailedBuild string  `json:",omitempty"`
	ImportPath  string  `json:",omitempty"`
}

// TestStatus is how one test ended.
type TestStatus string

const (
	TestPass TestStatus = "pass"
	TestFail TestStatus = "fail"
	TestSkip TestStatus = "skip"
)

// TestResult is one test, subtest, example or fuzz target of a go test run.
type TestResult struct {
	// Package is the import path of the test's package.
	Package string `json:"package"`
	// Name is the test's name as go test prints it; subtests are
	// "TestA/sub" (spaces in t.Run names become "_").
	Name string `json:"name"`
	// Status is pass, fail or skip. A test still running when its
	// package ended (a panic, a timeout, a killed run) is fail.
	Status TestStatus `json:"status"`
	// Elapsed is the test's run time as go test reported it (10 ms
	// resolution); zero when it did not say.
	Elapsed time.Duration `json:"elapsed"`
	// Output is what the test itself printed (t.Log, fmt.Print, the
	// failure messages), without go test's "=== RUN" and "--- PASS" lines.
	Output string `json:"output"`
}

// Benchmark is one parsed benchmark result line, e.g.
// "BenchmarkX-8   1000   1052 ns/op   128 B/op   2 allocs/op".
type Benchmark struct {
	Package string `json:"package"`
	// Name is the benchmark's name without the -GOMAXPROCS suffix.
	Name string `json:"name"`
	// Procs is the -GOMAXPROCS suffix (1 when absent).
	Procs int `json:"procs"`
	// Iterations is b.N of the measured run.
	Iterations int64 `json:"iterations"`
	// NsPerOp is the ns/op value; BytesPerOp and AllocsPerOp are B/op and
	// allocs/op (reported with -benchmem or b.ReportAllocs), MBPerSec is
	// MB/s (with b.SetBytes). Absent values are 0; Metrics says which
	// were reported.
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	MBPerSec    float64 `json:"mb_per_sec"`
	// Metrics holds every "value unit" pair of the line by unit,
	// including custom ones from b.ReportMetric.
	Metrics map[string]float64 `json:"metrics"`
}

// Coverage is one package's statement coverage (go test -cover).
type Coverage struct {
	Package string `json:"package"`
	// Percent of statements covered, 0-100; NoStatements is set instead
	// when the package has none.
	Percent      float64 `json:"percent"`
	NoStatements bool    `json:"no_statements,omitempty"`
}

// TestReport is what one go test run's event stream says.
type TestReport struct {
	// Tests in the order they started.
	Tests      []TestResult
	Benchmarks []Benchmark
	Coverage   []Coverage
	// Text is the concatenated Output of every output event (test and
	// package), in order: the run's text as the JSON stream carries it.
	Text string
	// BuildOutput is the concatenated build-output events (what go test
	// prints on stderr when not in JSON mode).
	BuildOutput string
	// Events counts the JSON records read; 0 means the input held no
	// event stream.
	Events int
}

var (
	benchLineRE = regexp.MustCompile(`^(Benchmark\S*?)(?:-(\d+))?\s+(\d+)((?:\s+[-+0-9.eE]+ \S+)+)\s*$`)
	coverageRE  = regexp.MustCompile(`coverage: (?:(\d+(?:\.\d+)?)% of statements|(\[no statements\]))`)
	framingRE   = regexp.MustCompile(`^\s*(?:=== (?:RUN|PAUSE|CONT|NAME)\s+(\S+)|--- (?:PASS|FAIL|SKIP|BENCH): (\S+) \([0-9.]+s\))\s*$`)
)

// ParseTestEvents reads a go test JSON event stream (one JSON object per
// line). Lines that are not JSON objects (a go command error printed
// before the stream, stray text) are skipped, so a partial stream still
// yields what it holds.
func ParseTestEvents(stream []byte) *TestReport {
	type key struct{ pkg, test string }
	var (
		rep     = &TestReport{}
		index   = map[key]int{}
		ended   = map[key]bool{} // the test's "--- PASS/FAIL/SKIP" line was seen
		pkgText = map[string]*strings.Builder{}
		pkgs    []string
		build   strings.Builder
	)
	for _, line := range bytes.Split(stream, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev TestEvent
		if json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			continue
		}
		rep.Events++
		switch ev.Action {
		case "build-output":
			build.WriteString(ev.Output)
			continue
		case "build-fail":
			continue
		}
		if ev.Package != "" && pkgText[ev.Package] == nil {
			pkgText[ev.Package] = &strings.Builder{}
			pkgs = append(pkgs, ev.Package)
		}
		if ev.Action == "output" {
			rep.Text += ev.Output
			if b := pkgText[ev.Package]; b != nil {
				b.WriteString(ev.Output)
			}
		}
		if ev.Test == "" {
			if ev.Action == "fail" || ev.Action == "pass" || ev.Action == "skip" {
				// The package ended. What it left running failed with it
				// (a panic, a timeout) or, in a passing package, was a
				// benchmark (which has no end event of its own).
				st := TestFail
				if ev.Action == "pass" {
					st = TestPass
				}
				for k, i := range index {
					if k.pkg == ev.Package && rep.Tests[i].Status == "" {
						rep.Tests[i].Status = st
					}
				}
			}
			continue
		}
		k := key{ev.Package, ev.Test}
		i, ok := index[k]
		if !ok {
			i = len(rep.Tests)
			index[k] = i
			rep.Tests = append(rep.Tests, TestResult{Package: ev.Package, Name: ev.Test})
		}
		t := &rep.Tests[i]
		switch ev.Action {
		case "output":
			if t.Status != "" {
				continue
			}
			if m := framingRE.FindStringSubmatch(ev.Output); m != nil && (m[1] == ev.Test || m[2] == ev.Test) {
				if m[2] != "" && !strings.Contains(ev.Output, "--- FAIL") {
					ended[k] = true
				}
				continue
			}
			if ended[k] && !strings.HasPrefix(ev.Output, " ") && !strings.HasPrefix(ev.Output, "\t") {
				// test2json over text attributes what follows a passed
				// test's result line (benchmark headers, package output)
				// to it until the next test starts. After a failed test's
				// line comes its log (without -v) or its panic: kept.
				continue
			}
			t.Output += ev.Output
		case "bench":
			t.Status = TestPass
		case "pass", "fail", "skip":
			t.Status = TestStatus(ev.Action)
			t.Elapsed = time.Duration(ev.Elapsed * float64(time.Second)).Round(time.Millisecond)
		}
	}
	for i := range rep.Tests {
		if rep.Tests[i].Status == "" {
			rep.Tests[i].Status = TestFail
		}
	}
	// Benchmark results and coverage are package output lines; a
	// benchmark's name and its numbers can arrive in separate events, so
	// read them from each package's whole text.
	for _, p := range pkgs {
		text := pkgText[p].String()
		for _, l := range strings.Split(text, "\n") {
			if b, ok := ParseBenchmarkLine(l); ok {
				b.Package = p
				rep.Benchmarks = append(rep.Benchmarks, b)
			}
		}
		if ms := coverageRE.FindAllStringSubmatch(text, -1); ms != nil {
			m := ms[len(ms)-1]
			c := Coverage{Package: p, NoStatements: m[2] != ""}
			c.Percent, _ = strconv.ParseFloat(m[1], 64)
			rep.Coverage = append(rep.Coverage, c)
		}
	}
	rep.BuildOutput = build.String()
	return rep
}

// ParseBenchmarkLine parses one benchmark result line as the testing
// package prints it; ok is false for any other line.
func ParseBenchmarkLine(line string) (Benchmark, bool) {
	m := benchLineRE.FindStringSubmatch(strings.TrimRight(line, "\r"))
	if m == nil {
		return Benchmark{}, false
	}
	b := Benchmark{Name: m[1], Procs: 1, Metrics: map[string]float64{}}
	if m[2] != "" {
		b.Procs, _ = strconv.Atoi(m[2])
	}
	b.Iterations, _ = strconv.ParseInt(m[3], 10, 64)
	f := strings.Fields(m[4])
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Benchmark{}, false
		}
		unit := f[i+1]
		b.Metrics[unit] = v
		switch unit {
		case "ns/op":
			b.NsPerOp = v
		case "B/op":
			b.BytesPerOp = v
		case "allocs/op":
			b.AllocsPerOp = v
		case "MB/s":
			b.MBPerSec = v
		}
	}
	if _, ok := b.Metrics["ns/op"]; !ok {
		return Benchmark{}, false
	}
	return b, true
}

// testLogRE is a t.Log/t.Error line as the testing package indents it:
// "    file_test.go:12: message".
var testLogRE = regexp.MustCompile(`^\s+([^\s:/]+\.go):(\d+): (.*)$`)

// TestDiagnostics returns a SourceTest diagnostic for each t.Error/t.Fatal
// position printed by a failing test. dirOf maps a package import path to
// its directory relative to the work directory ("" or "." for the work
// directory itself); nil means the file names stay as printed.
func TestDiagnostics(tests []TestResult, dirOf func(pkg string) string) []Diagnostic {
	var diags []Diagnostic
	for _, t := range tests {
		if t.Status != TestFail {
			continue
		}
		var last *Diagnostic
		for _, l := range strings.Split(t.Output, "\n") {
			if m := testLogRE.FindStringSubmatch(l); m != nil {
				file := m[1]
				if dirOf != nil {
					if dir := dirOf(t.Package); dir != "" && dir != "." {
						file = path.Join(dir, file)
					}
				}
				n, _ := strconv.Atoi(m[2])
				diags = append(diags, Diagnostic{File: file, Line: n, Message: t.Name + ": " + m[3], Source: SourceTest})
				last = &diags[len(diags)-1]
				continue
			}
			// Continuation of a multi-line t.Error message: deeper indent.
			if last != nil && strings.HasPrefix(l, "        ") {
				last.Message += "\n" + strings.TrimSpace(l)
				continue
			}
			last = nil
		}
	}
	return diags
}

// DirOfPackage maps an import path to its directory relative to the
// module root for a module whose path is modPath: "example.com/m/pkg/x"
// → "pkg/x", "example.com/m" → ".", "command-line-arguments" → ".".
// Other paths map to "".
func DirOfPackage(modPath, pkg string) string {
	switch {
	case pkg == "command-line-arguments", pkg == modPath:
		return "."
	case modPath != "" && strings.HasPrefix(pkg, modPath+"/"):
		return strings.TrimPrefix(pkg, modPath+"/")
	}
	return ""
}
