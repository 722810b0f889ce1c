package gotool

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
)

// The fixtures under testdata/ are real go tool runs: each archive holds a
// small module, the command run in it ("cmd"), extra environment ("env"),
// how its output is parsed ("parse"), what the parse must yield ("want"),
// and the recorded output ("stdout", "stderr", "exit"). go test -update
// re-records them with the host's go; TestFixturesMatchHostGo re-runs
// them and fails when the recording no longer matches what the host's go
// prints (after normalizing times, paths and benchmark numbers), so the
// fixtures cannot rot as Go changes.

var (
	update     = flag.Bool("update", false, "re-record testdata/*.txtar with the host's go")
	updateWant = flag.Bool("update-want", false, "rewrite the want sections of testdata/*.txtar from what the parsers return (review the diff!)")
)

const fixtureWorkDir = "/app" // recorded paths are rewritten to it

type fixture struct {
	name  string
	path  string
	ar    *txtar.Archive
	files []txtar.File // the module
	sect  map[string]string
}

func loadFixtures(t *testing.T) []*fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var fs []*fixture
	for _, p := range paths {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{name: strings.TrimSuffix(filepath.Base(p), ".txtar"), path: p, ar: ar, sect: map[string]string{}}
		for _, file := range ar.Files {
			switch file.Name {
			case "cmd", "env", "parse", "want", "stdout", "stderr", "exit":
				f.sect[file.Name] = string(file.Data)
			default:
				f.files = append(f.files, file)
			}
		}
		if f.sect["cmd"] == "" || f.sect["parse"] == "" {
			t.Fatalf("%s: needs cmd and parse sections", p)
		}
		fs = append(fs, f)
	}
	return fs
}

// record runs the fixture's command with the host's go in a fresh
// directory and returns stdout, stderr and the exit code with the
// directory's path replaced by /app.
func (f *fixture) record(t *testing.T) (stdout, stderr string, exit int) {
	t.Helper()
	dir := t.TempDir()
	for _, file := range f.files {
		p := filepath.Join(dir, filepath.FromSlash(file.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, file.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.TrimSpace(f.sect["cmd"]))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GOWORK=off", "GOTELEMETRY=off")
	for _, kv := range strings.Split(strings.TrimSpace(f.sect["env"]), "\n") {
		if kv != "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	default:
		t.Fatalf("%s: run: %v", f.name, err)
	}
	fix := func(s string) string {
		s = strings.ReplaceAll(s, dir, fixtureWorkDir)
		return s
	}
	return fix(o.String()), fix(e.String()), exit
}

var (
	normTimeRE    = regexp.MustCompile(`"Time":"[^"]*",?`)
	normElapsedRE = regexp.MustCompile(`,?"Elapsed":[0-9.e-]+`)
	normDurRE     = regexp.MustCompile(`\d+\.\d+s\b`)
	normProcsRE   = regexp.MustCompile(`(Benchmark\w+)-\d+`)
	normMetricRE  = regexp.MustCompile(`\d+(?:\.\d+)? (ns/op|B/op|allocs/op|MB/s)`)
	normItersRE   = regexp.MustCompile(`(\s|\\t)\d+((?:\s|\\t)+N ns/op)`)
	normSpaceRE   = regexp.MustCompile(`(?:[ \t]|\\t)+`)
	normGoVerRE   = regexp.MustCompile(`go1\.\d+(\.\d+)?`)
	normCoverRE   = regexp.MustCompile(`coverage: \d+\.\d+%`)
	normGorRE     = regexp.MustCompile(`goroutine \d+`)
	normHexRE     = regexp.MustCompile(`0x[0-9a-f]+`)
)

// normalize removes what changes between runs of the same command: times,
// durations, benchmark numbers and GOMAXPROCS suffixes, spacing inside
// lines, Go versions, and the order of lines (parallel builds print
// packages in any order).
func normalize(s string) string {
	s = normTimeRE.ReplaceAllString(s, "")
	s = normElapsedRE.ReplaceAllString(s, "")
	s = normDurRE.ReplaceAllString(s, "D")
	s = normProcsRE.ReplaceAllString(s, "$1-P")
	s = normMetricRE.ReplaceAllString(s, "N $1")
	s = normItersRE.ReplaceAllString(s, "${1}N$2")
	s = normGoVerRE.ReplaceAllString(s, "goV")
	s = normCoverRE.ReplaceAllString(s, "coverage: C%")
	s = normGorRE.ReplaceAllString(s, "goroutine N")
	s = normHexRE.ReplaceAllString(s, "0xX")
	s = normSpaceRE.ReplaceAllString(s, " ")
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// normalizeLines normalizes want lines for comparison across runs.
func normalizeLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		l = normDurRE.ReplaceAllString(l, "D")
		l = normGorRE.ReplaceAllString(l, "goroutine N")
		l = normHexRE.ReplaceAllString(l, "0xX")
		out[i] = l
	}
	slices.Sort(out) // packages build in parallel, in any order
	return out
}

func needsCgo(f *fixture) bool { return strings.Contains(f.sect["env"], "CGO_ENABLED=1") }

func hostCanRun(t *testing.T, f *fixture) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	if needsCgo(f) {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skip("cgo fixture and no gcc on PATH")
		}
	}
}

// TestFixturesMatchHostGo re-runs every fixture's command with the host's
// go and compares with the recording. With -update it rewrites them.
func TestFixturesMatchHostGo(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			hostCanRun(t, f)
			stdout, stderr, exit := f.record(t)
			if *update {
				var files []txtar.File
				for _, file := range f.ar.Files {
					switch file.Name {
					case "stdout", "stderr", "exit":
					default:
						files = append(files, file)
					}
				}
				f.ar.Files = append(files,
					txtar.File{Name: "stdout", Data: []byte(stdout)},
					txtar.File{Name: "stderr", Data: []byte(stderr)},
					txtar.File{Name: "exit", Data: []byte(strconv.Itoa(exit) + "\n")})
				if err := os.WriteFile(f.path, txtar.Format(f.ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got, want := strconv.Itoa(exit), strings.TrimSpace(f.sect["exit"]); got != want {
				t.Errorf("exit code %s, recorded %s (stderr: %s)", got, want, stderr)
			}
			// What the parsers make of the host's output now must be what
			// the fixture wants.
			fresh := *f
			fresh.sect = maps.Clone(f.sect)
			fresh.sect["stdout"], fresh.sect["stderr"] = stdout, stderr
			got := normalizeLines(fresh.parse(t))
			want := normalizeLines(strings.Split(strings.TrimSpace(f.sect["want"]), "\n"))
			if !slices.Equal(got, want) {
				t.Errorf("parsing the host go's output now gives:\n%s\nthe fixture wants:\n%s\n(re-record with go test -update ./pkg/goruntime/gotool)",
					strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// Test runs vary in timing and interleaving; the go
			// command's build and gofmt output must match as recorded.
			if mode := strings.Fields(f.sect["parse"])[0]; mode == "build" || mode == "gofmt" {
				for _, s := range []struct{ name, got string }{{"stdout", stdout}, {"stderr", stderr}} {
					if g, w := normalize(s.got), normalize(f.sect[s.name]); g != w {
						t.Errorf("%s differs from the recording (re-record with go test -update ./pkg/goruntime/gotool):\n--- host go now\n%s\n--- recorded\n%s", s.name, g, w)
					}
				}
			}
		})
	}
}

// TestFixturesParse checks that parsing each recorded output yields the
// fixture's want lines.
func TestFixturesParse(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			if _, ok := f.sect["stdout"]; !ok {
				t.Fatalf("not recorded yet: go test -update ./pkg/goruntime/gotool")
			}
			got := f.parse(t)
			if *updateWant {
				for i := range f.ar.Files {
					if f.ar.Files[i].Name == "want" {
						f.ar.Files[i].Data = []byte(strings.Join(got, "\n") + "\n")
					}
				}
				if err := os.WriteFile(f.path, txtar.Format(f.ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := strings.Split(strings.TrimSpace(f.sect["want"]), "\n")
			if strings.TrimSpace(f.sect["want"]) == "" {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Errorf("parse %s:\n--- got\n%s\n--- want\n%s", f.sect["parse"], strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// parse applies the fixture's parse mode to its recorded output and
// renders the result as want lines.
func (f *fixture) parse(t *testing.T) []string {
	mode := strings.Fields(f.sect["parse"])
	var lines []string
	diag := func(ds []Diagnostic) {
		for _, d := range ds {
			msg, _, _ := strings.Cut(d.Message, "\n")
			lines = append(lines, fmt.Sprintf("diag %s %s:%d:%d: %s", d.Source, d.File, d.Line, d.Column, msg))
		}
	}
	report := func(r *TestReport) {
		for _, tr := range r.Tests {
			out := strings.TrimSpace(tr.Output)
			if strings.HasPrefix(tr.Name, "Benchmark") {
				out = "(measurements)"
			}
			lines = append(lines, fmt.Sprintf("test %s %s %s %q", tr.Status, tr.Package, tr.Name, out))
		}
		for _, b := range r.Benchmarks {
			lines = append(lines, fmt.Sprintf("bench %s %s ns/op>0=%v B/op=%v allocs/op=%v", b.Package, b.Name, b.NsPerOp > 0,
				hasMetric(b, "B/op"), hasMetric(b, "allocs/op")))
		}
		for _, c := range r.Coverage {
			lines = append(lines, fmt.Sprintf("cover %s %.1f", c.Package, c.Percent))
		}
		diag(ParseBuildOutput(r.BuildOutput, SourceCompile, fixtureWorkDir))
		mod := modulePathOf(f)
		diag(TestDiagnostics(r.Tests, func(p string) string { return DirOfPackage(mod, p) }))
	}
	switch mode[0] {
	case "build": // build <source>: stderr
		diag(ParseBuildOutput(f.sect["stderr"], Source(mode[1]), fixtureWorkDir))
	case "gofmt":
		diag(ParseGofmtDiff(f.sect["stdout"], fixtureWorkDir))
		diag(ParseBuildOutput(f.sect["stderr"], SourceGofmt, fixtureWorkDir))
	case "events": // go test -json on stdout
		report(ParseTestEvents([]byte(f.sect["stdout"])))
	case "text": // go test's text on stdout, through test2json; build errors on stderr
		var stream []byte
		for _, po := range SplitTestOutput(f.sect["stdout"]) {
			stream = append(stream, test2json(t, po)...)
		}
		report(ParseTestEvents(stream))
		diag(ParseBuildOutput(f.sect["stderr"], SourceCompile, fixtureWorkDir))
	default:
		t.Fatalf("unknown parse mode %q", mode[0])
	}
	return lines
}

func hasMetric(b Benchmark, unit string) bool { _, ok := b.Metrics[unit]; return ok }

func modulePathOf(f *fixture) string {
	for _, file := range f.files {
		if file.Name == "go.mod" {
			for _, l := range strings.Split(string(file.Data), "\n") {
				if rest, ok := strings.CutPrefix(l, "module "); ok {
					return strings.TrimSpace(rest)
				}
			}
		}
	}
	return ""
}

// test2json runs the host's `go tool test2json` over one package's text.
func test2json(t *testing.T, po PackageOutput) []byte {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH for go tool test2json")
	}
	cmd := exec.Command("go", "tool", "test2json", "-p", po.Package)
	cmd.Stdin = strings.NewReader(po.Text)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool test2json: %v", err)
	}
	return out
}
