package local_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
)

// Go-aware results through real bubblewrap: diagnostics, per-test results,
// benchmarks, checks, the race detector.

func files(kv ...string) []goruntime.File {
	var fs []goruntime.File
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, goruntime.File{Path: kv[i], Data: []byte(kv[i+1])})
	}
	return fs
}

func findDiag(ds []goruntime.Diagnostic, file string, line, col int, src goruntime.DiagnosticSource) *goruntime.Diagnostic {
	for i, d := range ds {
		if d.File == file && d.Line == line && (col == 0 || d.Column == col) && d.Source == src {
			return &ds[i]
		}
	}
	return nil
}

func findTest(ts []goruntime.TestResult, name string) *goruntime.TestResult {
	for i, t := range ts {
		if t.Name == name {
			return &ts[i]
		}
	}
	return nil
}

const nestedGoMod = "module example.com/m\n\ngo 1.24\n"

func TestGoAwareTypeErrorInNestedPackage(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	res := run(t, s, goruntime.Request{
		Files: files(
			"go.mod", nestedGoMod,
			"cmd/app/main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/internal/calc\"\n)\n\nfunc main() { fmt.Println(calc.Add(1, 2)) }\n",
			"internal/calc/calc.go", "package calc\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn \"sum\"\n}\n",
		),
		Command: "go build ./...",
	})
	if res.Outcome != goruntime.OutcomeBuildFailed {
		t.Fatalf("outcome %s, want build_failed; stderr: %s", res.Outcome, res.Stderr)
	}
	d := findDiag(res.Diagnostics, "internal/calc/calc.go", 5, 9, goruntime.SourceCompile)
	if d == nil || !strings.Contains(d.Message, `cannot use "sum"`) {
		t.Fatalf("no compile diagnostic at internal/calc/calc.go:5:9 in %+v", res.Diagnostics)
	}
	if !strings.Contains(res.Stderr, "internal/calc/calc.go:5:9") {
		t.Errorf("raw stderr lost: %q", res.Stderr)
	}
	// The same through go run of the nested main package.
	res = run(t, s, goruntime.Request{Command: "go run ./cmd/app"})
	if findDiag(res.Diagnostics, "internal/calc/calc.go", 5, 9, goruntime.SourceCompile) == nil {
		t.Errorf("go run: no diagnostic in %+v (stderr %q)", res.Diagnostics, res.Stderr)
	}
}

const testsPkg = `package calc

import (
	"fmt"
	"testing"
)

func Double(x int) int { return 2 * x }

func TestDouble(t *testing.T) {
	t.Run("two", func(t *testing.T) { t.Log("fine") })
	t.Run("wrong want", func(t *testing.T) {
		fmt.Println("printed by the subtest")
		t.Errorf("Double(2) = %d, want 5", Double(2))
	})
}

func TestSkipped(t *testing.T) { t.Skip("not on this machine") }

func TestPasses(t *testing.T) {}
`

func checkTestResults(t *testing.T, res *goruntime.Result) {
	t.Helper()
	if res.Outcome != goruntime.OutcomeTestFailed {
		t.Errorf("outcome %s, want test_failed", res.Outcome)
	}
	sub := findTest(res.Tests, "TestDouble/wrong_want")
	if sub == nil || sub.Status != goruntime.TestFail || sub.Package != "example.com/m/calc" ||
		!strings.Contains(sub.Output, "printed by the subtest") || !strings.Contains(sub.Output, "calc_test.go:14: Double(2) = 4, want 5") {
		t.Errorf("failing subtest: %+v", sub)
	}
	if sub != nil && strings.Contains(sub.Output, "=== RUN") {
		t.Errorf("subtest output keeps go test's framing: %q", sub.Output)
	}
	skip := findTest(res.Tests, "TestSkipped")
	if skip == nil || skip.Status != goruntime.TestSkip || !strings.Contains(skip.Output, "not on this machine") {
		t.Errorf("skipped test: %+v", skip)
	}
	if p := findTest(res.Tests, "TestPasses"); p == nil || p.Status != goruntime.TestPass {
		t.Errorf("passing test: %+v", p)
	}
	if ok := findTest(res.Tests, "TestDouble/two"); ok == nil || ok.Status != goruntime.TestPass || !strings.Contains(ok.Output, "fine") {
		t.Errorf("passing subtest: %+v", ok)
	}
	if d := findDiag(res.Diagnostics, "calc/calc_test.go", 14, 0, goruntime.SourceTest); d == nil {
		t.Errorf("no test diagnostic at calc/calc_test.go:14 in %+v", res.Diagnostics)
	}
}

func TestGoAwareFailingSubtestAndSkippedTest(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	fs := files("go.mod", nestedGoMod, "calc/calc_test.go", testsPkg)

	t.Run("Execute go test -v", func(t *testing.T) {
		res := run(t, s, goruntime.Request{Files: fs, Command: "go test -v ./..."})
		checkTestResults(t, res)
		// The text is go test -v's, unchanged: subtest results nested.
		if !strings.Contains(res.Stdout, "    --- FAIL: TestDouble/wrong_want") {
			t.Errorf("stdout is not go test -v's text: %s", res.Stdout)
		}
	})
	t.Run("Session.Test", func(t *testing.T) {
		res, err := s.Test(context.Background(), goruntime.TestRequest{Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		checkTestResults(t, res)
		if strings.Contains(res.Stdout, `"Action"`) {
			t.Errorf("Test's Stdout is the JSON stream, want its text: %s", res.Stdout)
		}
	})
	t.Run("Execute go test -json", func(t *testing.T) {
		res := run(t, s, goruntime.Request{Command: "go test -json ./..."})
		checkTestResults(t, res)
		if !strings.Contains(res.Stdout, `"Action":"fail"`) {
			t.Errorf("stdout changed: %s", res.Stdout)
		}
	})
	t.Run("plain go test lists what it printed", func(t *testing.T) {
		res := run(t, s, goruntime.Request{Command: "go test ./..."})
		if sub := findTest(res.Tests, "TestDouble/wrong_want"); sub == nil || sub.Status != goruntime.TestFail ||
			!strings.Contains(sub.Output, "Double(2) = 4, want 5") {
			t.Errorf("failing subtest: %+v (all: %+v)", sub, res.Tests)
		}
	})
}

// TestGoAwareTest2jsonBuiltOnce: where the sandbox has no test2json from
// its backend (goruntime.Test2jsonEnv unset or naming nothing: a
// sandbox opened before the seed was complete), the conversion of a plain
// go test's text builds one the sandbox keeps and runs it directly (not
// `go tool test2json`, which checks its build each time); removed by a
// command, it is built again, and the results are the same.
func TestGoAwareTest2jsonBuiltOnce(t *testing.T) {
	sb, err := newBackend(t, testOptions()).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	s := goruntime.NewSession(&tracedSandbox{Sandbox: sb, prefix: "unset " + goruntime.Test2jsonEnv}, goruntime.Options{})
	fs := files("go.mod", nestedGoMod, "calc/calc_test.go", testsPkg)
	const kept = `test -x "$HOME/.cache/go-runtime-sandbox/test2json"`
	for _, before := range []string{"true", `rm -f "$HOME/.cache/go-runtime-sandbox/test2json"`} {
		run(t, s, goruntime.Request{Command: before})
		res := run(t, s, goruntime.Request{Files: fs, Command: "go test -v ./..."})
		checkTestResults(t, res)
		if res := run(t, s, goruntime.Request{Command: kept}); res.ExitCode != 0 {
			t.Fatalf("after %q and a go test: no test2json build kept in the sandbox (exit %d: %s)", before, res.ExitCode, res.Stderr)
		}
	}
}

// tracedSandbox runs the session's conversion of go test's text (the one
// command that names test2json) after prefix (default: the shell's trace
// on), and keeps its stderr: with the trace, every command the conversion
// ran, with its arguments.
type tracedSandbox struct {
	goruntime.Sandbox
	prefix string
	traces []string
}

func (t *tracedSandbox) Exec(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	conversion := strings.Contains(req.Command, "test2json")
	if conversion {
		req.Command = cmp.Or(t.prefix, "set -x") + "\n" + req.Command
	}
	res, err := t.Sandbox.Exec(ctx, req)
	if conversion && err == nil {
		t.traces = append(t.traces, res.Stderr)
	}
	return res, err
}

// TestGoAwareFirstGoTestBuildsNoTest2json: a fresh sandbox's first plain
// go test gets its per-test results from the seed's test2json
// (goruntime.Test2jsonEnv): the conversion runs that file and no go
// command, so nothing builds or links test2json in the sandbox (it did,
// ~350 ms, in every fresh session's first go test: `go build` never
// takes a linked program from the build cache). As root, with GOCACHE
// an overlay of the seed on the sandbox's disk and, without a disk and a
// uid of its own, links to it; a user's sandboxes (a copy, a memory
// disk's overlay) in TestRootlessLimits.
func TestGoAwareFirstGoTestBuildsNoTest2json(t *testing.T) {
	variants := []local.Relax{localtest.Here()}
	if os.Geteuid() == 0 {
		variants = append(variants, local.Relax{DiskQuota: true, HostUID: true}) // links to the seed
	}
	for _, relax := range variants {
		t.Run(fmt.Sprintf("relax disk %t", relax.DiskQuota), func(t *testing.T) {
			opts := testOptions()
			opts.Relax = relax
			if err := firstGoTestBuildsNoTest2json(context.Background(), newBackend(t, opts)); err != nil {
				t.Error(err)
			}
		})
	}
}

// firstGoTestBuildsNoTest2json opens a sandbox of b (its seed complete),
// runs a plain go test as its first command, and says what went wrong:
// results missing, or the conversion of its text ran the go command
// rather than the seed's test2json.
func firstGoTestBuildsNoTest2json(ctx context.Context, b *local.Backend) error {
	sb, err := b.Open(ctx)
	if err != nil {
		return err
	}
	defer sb.Close(context.WithoutCancel(ctx))
	traced := &tracedSandbox{Sandbox: sb}
	s := goruntime.NewSession(traced, goruntime.Options{})
	res, err := s.Execute(ctx, goruntime.Request{Files: files("go.mod", nestedGoMod, "calc/calc_test.go", testsPkg), Command: "go test -v ./...", Timeout: 3 * time.Minute})
	if err != nil {
		return err
	}
	if sub := findTest(res.Tests, "TestDouble/wrong_want"); sub == nil || sub.Status != goruntime.TestFail || findTest(res.Tests, "TestPasses") == nil {
		return fmt.Errorf("per-test results of the first go test: %+v (stdout %q, stderr %q)", res.Tests, res.Stdout, res.Stderr)
	}
	if len(traced.traces) != 1 {
		return fmt.Errorf("%d conversions of go test's text, want 1", len(traced.traces))
	}
	env, err := s.Execute(ctx, goruntime.Request{Command: "echo $" + goruntime.Test2jsonEnv})
	if err != nil {
		return err
	}
	seedT2J := strings.TrimSpace(env.Stdout)
	if seedT2J == "" {
		return fmt.Errorf("no $%s in the sandbox", goruntime.Test2jsonEnv)
	}
	var ranSeeds bool
	for line := range strings.Lines(traced.traces[0]) {
		cmd, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "+ ")
		if !ok {
			continue
		}
		if f := strings.Fields(cmd); len(f) > 0 && (f[0] == "go" || strings.HasSuffix(f[0], "/go")) {
			return fmt.Errorf("the conversion ran the go command: %q\nwhole trace:\n%s", cmd, traced.traces[0])
		}
		ranSeeds = ranSeeds || strings.HasPrefix(cmd, seedT2J+" -p example.com/m/calc")
	}
	if !ranSeeds {
		return fmt.Errorf("the conversion did not run the seed's %s:\n%s", seedT2J, traced.traces[0])
	}
	own, err := s.Execute(ctx, goruntime.Request{Command: `test -e "$HOME/.cache/go-runtime-sandbox/test2json"`})
	if err != nil {
		return err
	}
	if own.ExitCode == 0 {
		return errors.New("the sandbox built a test2json of its own")
	}
	return nil
}

// TestGoAwareTest2jsonInlineOrUploaded: go test's text goes to test2json
// inside the conversion's command (one request) when it can travel there
// unchanged, and is uploaded first when it cannot (a NUL, which no
// command may hold): per-test results either way.
func TestGoAwareTest2jsonInlineOrUploaded(t *testing.T) {
	sb, err := newBackend(t, testOptions()).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	traced := &tracedSandbox{Sandbox: sb}
	s := goruntime.NewSession(traced, goruntime.Options{})
	for _, c := range []struct {
		name, print string
		uploaded    bool
	}{
		{"plain text", `"fine"`, false},
		// Bytes that are not UTF-8 arrive as U+FFFD already (the
		// result's JSON), so they travel inline.
		{"not UTF-8", `"bad \xff byte"`, false},
		{"a NUL", `"nul \x00 byte"`, true},
	} {
		traced.traces = nil
		src := "package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestPrints(t *testing.T) { fmt.Println(" + c.print + ") }\n"
		res := run(t, s, goruntime.Request{Files: files("go.mod", nestedGoMod, "calc/calc_test.go", src), Command: "go test -v ./..."})
		if p := findTest(res.Tests, "TestPrints"); p == nil || p.Status != goruntime.TestPass {
			t.Errorf("%s: no passed TestPrints in %+v (stdout %q)", c.name, res.Tests, res.Stdout)
		}
		if len(traced.traces) != 1 {
			t.Fatalf("%s: %d conversions, want 1", c.name, len(traced.traces))
		}
		if uploaded := strings.Contains(traced.traces[0], "+ tar -xf"); uploaded != c.uploaded {
			t.Errorf("%s: text uploaded %t, want %t; trace:\n%s", c.name, uploaded, c.uploaded, traced.traces[0])
		}
	}
}

// TestSeedTest2jsonReadOnly: the seed's test2json, which every sandbox's
// conversion runs, cannot be changed by a sandbox for another. As root
// the file is nobody's, so writing, chmod and truncating it fail (as
// another user a sandbox without a disk of its own has a copy, its own);
// whatever a sandbox swaps in under its own GOCACHE stays in its own
// view; another sandbox, open meanwhile or opened after, runs the seed's
// file, and the host's is unchanged.
func TestSeedTest2jsonReadOnly(t *testing.T) {
	b := newBackend(t, testOptions())
	// The complete seeds' (the base seed's, and the extra seed's when it
	// is complete: a sandbox's GOCACHE shows one of them).
	var host []string
	seeds, _ := filepath.Glob(filepath.Join(b.StateDir(), "seed", "*", ".complete"))
	for _, c := range seeds {
		if p := filepath.Join(filepath.Dir(c), seed.Test2json); func() bool { _, err := os.Stat(p); return err == nil }() {
			host = append(host, p)
		}
	}
	if len(host) == 0 {
		t.Fatalf("no test2json in a complete seed under %s", b.StateDir())
	}
	hostSums := func() []string {
		var sums []string
		for _, p := range host {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, fmt.Sprintf("%x", sha256.Sum256(data)))
		}
		return sums
	}
	hostBefore := hostSums()
	bystander, attacker := openSession(t, b), openSession(t, b)
	const sum = `sha256sum "$` + goruntime.Test2jsonEnv + `" | cut -d' ' -f1`
	before := mustOK(t, bystander, goruntime.Request{Command: sum}).Stdout
	f := `"$` + goruntime.Test2jsonEnv + `"`
	for _, cmd := range []string{"echo x >> " + f, "chmod u+w " + f, "truncate -s 0 " + f} {
		if res := run(t, attacker, goruntime.Request{Command: cmd}); res.ExitCode == 0 && os.Geteuid() == 0 {
			t.Errorf("%q succeeded on the seed's test2json", cmd)
		}
	}
	// Its own view, where it can: a test2json that reports a test that
	// never ran, in place of the seed's (its own link or copy replaced,
	// or the directory moved aside where its GOCACHE lets it).
	fake := `printf '#!/bin/sh\necho "{\"Action\":\"pass\",\"Test\":\"Fake\"}"\n' > ` + f + ` && chmod +x ` + f
	for _, cmd := range []string{
		"rm -f " + f + " && " + fake,
		`d=$(dirname ` + f + `) && mv "$d" "$d.seed" && mkdir "$d" && ` + fake,
	} {
		if res := run(t, attacker, goruntime.Request{Command: cmd}); res.ExitCode == 0 {
			break
		}
	}
	fs := files("go.mod", nestedGoMod, "calc/calc_test.go", testsPkg)
	res := run(t, attacker, goruntime.Request{Files: fs, Command: "go test -v ./..."})
	t.Logf("the attacker's own conversion reported Fake: %t", findTest(res.Tests, "Fake") != nil)
	later := openSession(t, b)
	for name, s := range map[string]*goruntime.Session{"a sandbox open meanwhile": bystander, "a sandbox opened after": later} {
		if after := mustOK(t, s, goruntime.Request{Command: sum}).Stdout; after != before {
			t.Errorf("%s: the seed's test2json changed: %s -> %s", name, before, after)
		}
		res := run(t, s, goruntime.Request{Files: fs, Command: "go test -v ./..."})
		checkTestResults(t, res)
		if findTest(res.Tests, "Fake") != nil {
			t.Errorf("%s: ran the attacker's test2json", name)
		}
	}
	if after := hostSums(); !slices.Equal(after, hostBefore) {
		t.Errorf("the host's seed test2json changed: %v -> %v", hostBefore, after)
	}
}

func TestGoAwareBenchmarkAndCoverage(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	res, err := s.Test(context.Background(), goruntime.TestRequest{
		Files: files("go.mod", nestedGoMod,
			"fmtx/fmtx.go", "package fmtx\n\nimport \"strconv\"\n\n// F formats n.\nfunc F(n int) string {\n\tif n < 0 {\n\t\treturn \"neg\"\n\t}\n\treturn strconv.Itoa(n)\n}\n",
			"fmtx/fmtx_test.go", "package fmtx\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) { _ = F(1) }\n\nfunc BenchmarkF(b *testing.B) {\n\tb.ReportAllocs()\n\tfor b.Loop() {\n\t\t_ = F(123456)\n\t}\n}\n"),
		Bench: ".", BenchTime: "200x", Cover: true, Timeout: 3 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != goruntime.OutcomeOK {
		t.Fatalf("outcome %s: %s %s", res.Outcome, res.Stdout, res.Stderr)
	}
	if len(res.Benchmarks) != 1 || res.Benchmarks[0].Name != "BenchmarkF" || res.Benchmarks[0].NsPerOp <= 0 ||
		res.Benchmarks[0].Iterations != 200 || res.Benchmarks[0].Metrics["allocs/op"] < 1 {
		t.Errorf("benchmarks: %+v", res.Benchmarks)
	}
	if len(res.Coverage) != 1 || res.Coverage[0].Package != "example.com/m/fmtx" || res.Coverage[0].Percent <= 0 || res.Coverage[0].Percent >= 100 {
		t.Errorf("coverage: %+v", res.Coverage)
	}
}

func TestGoAwareCheck(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	// init writes a file: if Check ran any user code, it would exist.
	res, err := s.Check(context.Background(), goruntime.CheckRequest{Files: files(
		"go.mod", nestedGoMod,
		"main.go", "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() { os.WriteFile(\"/app/ran\", nil, 0o644) }\n\nfunc main() {\n\tfmt.Printf(\"%d\\n\", \"not a number\")\n}\n",
		"lib/lib.go", "package lib\n\nfunc  Bad( ) int { return 1 }\n",
		"lib/lib_test.go", "package lib\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc init() { os.WriteFile(\"/app/ran-test\", nil, 0o644) }\n\nfunc TestBad(t *testing.T) {\n\tvar s string = Bad()\n\t_ = s\n}\n",
	)})
	if err != nil {
		t.Fatal(err)
	}
	if d := findDiag(res.Diagnostics, "lib/lib.go", 3, 0, goruntime.SourceGofmt); d == nil {
		t.Errorf("no gofmt diagnostic for lib/lib.go:3 in %+v", res.Diagnostics)
	}
	if !strings.Contains(res.GofmtDiff, "+func Bad() int { return 1 }") {
		t.Errorf("gofmt diff: %q", res.GofmtDiff)
	}
	if d := findDiag(res.Diagnostics, "main.go", 11, 14, goruntime.SourceVet); d == nil || !strings.Contains(d.Message, "wrong type") {
		t.Errorf("no vet finding at main.go:11:14 in %+v", res.Diagnostics)
	}
	if d := findDiag(res.Diagnostics, "lib/lib_test.go", 11, 17, goruntime.SourceCompile); d == nil {
		t.Errorf("no type error in the test file at lib/lib_test.go:11:17 in %+v", res.Diagnostics)
	}
	for _, f := range []string{"ran", "ran-test", "main", "app"} {
		if _, err := s.ReadFile(context.Background(), f); err == nil {
			t.Errorf("Check left /app/%s: it ran or linked user code", f)
		}
	}
	// A clean module checks clean.
	res, err = s.Check(context.Background(), goruntime.CheckRequest{Files: files(
		"main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ok\") }\n",
		"lib/lib.go", "package lib\n\nfunc Bad() int { return 1 }\n",
		"lib/lib_test.go", "package lib\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) { _ = Bad() }\n",
	)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.GofmtDiff != "" {
		t.Errorf("clean module: %+v", res)
	}
}

const racyTest = `package racy

import (
	"sync"
	"testing"
)

func TestRace(t *testing.T) {
	n := 0
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); n++ }()
	}
	wg.Wait()
	_ = n
}
`

func TestGoAwareRaceDetector(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the race detector needs a C compiler on the host's /usr (apt-get install gcc)")
	}
	b := newBackend(t, testOptions())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := b.PrepareExtra(ctx); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, b)
	fs := files("go.mod", nestedGoMod, "racy/racy_test.go", racyTest)
	res, err := s.Test(context.Background(), goruntime.TestRequest{Files: fs, Race: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tr := findTest(res.Tests, "TestRace")
	if tr == nil || tr.Status != goruntime.TestFail || !strings.Contains(tr.Output, "WARNING: DATA RACE") {
		t.Fatalf("race not reported: test %+v\nstdout: %s\nstderr: %s", tr, res.Stdout, res.Stderr)
	}
	// The same through Execute: -race turns cgo on by itself.
	r := run(t, s, goruntime.Request{Command: "go test -race ./racy"})
	if !strings.Contains(r.Stdout, "WARNING: DATA RACE") || r.Outcome != goruntime.OutcomeTestFailed {
		t.Errorf("go test -race: outcome %s\nstdout: %s\nstderr: %s", r.Outcome, r.Stdout, r.Stderr)
	}
}

// secondGo is the extra toolchain the tests run; provisioned into the
// host module cache (network once) when missing.
const secondGo = "1.25.9"

func TestGoAwareSecondGoVersion(t *testing.T) {
	b := newBackend(t, testOptions())
	ctx := context.Background()
	if _, others, err := b.Toolchains(); err != nil {
		t.Fatal(err)
	} else if !slices.Contains(others, "go"+secondGo) {
		t.Logf("provisioning Go %s into the host module cache", secondGo)
		var log strings.Builder
		if err := b.ProvisionToolchain(ctx, secondGo, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
	}
	s := openSession(t, b)
	res := mustOK(t, s, goruntime.Request{Command: "go version", GoVersion: secondGo})
	if !strings.Contains(res.Stdout, "go version go"+secondGo+" ") {
		t.Errorf("GoVersion %s: %q", secondGo, res.Stdout)
	}
	current, _, _ := b.Toolchains()
	res = mustOK(t, s, goruntime.Request{Command: "go version"})
	if !strings.Contains(res.Stdout, "go version "+current+" ") {
		t.Errorf("default: %q, want %s", res.Stdout, current)
	}
	// It builds and runs code too (the standard library compiles on first use).
	res = mustOK(t, s, goruntime.Request{
		Files:     files("v/main.go", "package main\n\nimport (\n\t\"fmt\"\n\t\"runtime\"\n)\n\nfunc main() { fmt.Println(runtime.Version()) }\n"),
		Command:   "go run ./v/main.go",
		GoVersion: "go" + secondGo,
		Timeout:   10 * time.Minute,
	})
	if strings.TrimSpace(res.Stdout) != "go"+secondGo {
		t.Errorf("runtime.Version() = %q", res.Stdout)
	}
	_, err := s.Execute(ctx, goruntime.Request{Command: "go version", GoVersion: "1.19.99"})
	if !errors.Is(err, goruntime.ErrToolchainUnavailable) || !strings.Contains(err.Error(), "go"+secondGo) || !strings.Contains(err.Error(), current+" (default)") {
		t.Errorf("unavailable version: %v", err)
	}
	if _, err := s.Execute(ctx, goruntime.Request{Command: "go version", GoVersion: "latest"}); err == nil || !strings.Contains(err.Error(), "want a release") {
		t.Errorf("bad version: %v", err)
	}
}
