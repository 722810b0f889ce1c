package corpus_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/corpus"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

func TestLoadCorpus(t *testing.T) {
	cases, err := corpus.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 25 {
		t.Fatalf("corpus has %d cases, want at least 25", len(cases))
	}
	outcomes := map[goruntime.Outcome]int{}
	for _, c := range cases {
		outcomes[c.WantOutcome]++
		hasGo := false
		for _, f := range c.Files {
			hasGo = hasGo || strings.HasSuffix(f.Path, ".go")
		}
		if !hasGo {
			t.Errorf("case %s has no .go file", c.Name)
		}
		if err := goruntime.ValidateFiles(c.Files); err != nil {
			t.Errorf("case %s: %v", c.Name, err)
		}
	}
	// The corpus must exercise every outcome a Go program can reach without
	// a sandbox limit.
	for _, o := range []goruntime.Outcome{goruntime.OutcomeOK, goruntime.OutcomeBuildFailed, goruntime.OutcomeTestFailed,
		goruntime.OutcomePanic, goruntime.OutcomeRuntimeError, goruntime.OutcomeTimeout} {
		if outcomes[o] == 0 {
			t.Errorf("no case has outcome %s", o)
		}
	}
}

func TestParseSpec(t *testing.T) {
	c, err := corpus.ParseSpec("x", []byte(`# a comment
note: covers things
command: go test -v .
stdin: in/data.txt
env: A=1
env: B=two words=yes
timeout: 2s
compare: stdout stderr
exit: 3
outcome: test_failed
slow: true
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Command != "go test -v ." || c.Stdin != "in/data.txt" || c.Env["A"] != "1" || c.Env["B"] != "two words=yes" ||
		c.Timeout != 2*time.Second || !c.CompareStderr || c.WantExit != 3 || c.WantOutcome != goruntime.OutcomeTestFailed || !c.Slow {
		t.Errorf("parsed %+v", c)
	}
	if got, want := c.Script(), "{ go test -v .\n} < 'in/data.txt'"; got != want {
		t.Errorf("Script() = %q, want %q", got, want)
	}

	d, err := corpus.ParseSpec("y", []byte("note: n\nexit: 0\noutcome: ok\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Command != corpus.DefaultCommand || d.Timeout != corpus.DefaultTimeout || d.CompareStderr || d.Script() != corpus.DefaultCommand {
		t.Errorf("defaults not applied: %+v", d)
	}
}

func TestParseSpecRefusesBadInput(t *testing.T) {
	const base = "note: n\nexit: 0\noutcome: ok\n"
	bad := map[string]string{
		"no colon":          base + "command go run .\n",
		"unknown key":       base + "args: a b\n",
		"duplicate key":     base + "command: a\ncommand: b\n",
		"empty command":     base + "command:\n",
		"absolute stdin":    base + "stdin: /etc/passwd\n",
		"escaping stdin":    base + "stdin: ../x\n",
		"unclean stdin":     base + "stdin: a/../b\n",
		"env without =":     base + "env: FOO\n",
		"duplicate env":     base + "env: A=1\nenv: A=2\n",
		"bad timeout":       base + "timeout: soon\n",
		"negative timeout":  base + "timeout: -1s\n",
		"unknown stream":    base + "compare: stdout stdlog\n",
		"no stdout compare": base + "compare: stderr\n",
		"bad exit":          "note: n\nexit: three\noutcome: ok\n",
		"exit out of range": "note: n\nexit: 300\noutcome: ok\n",
		"unknown outcome":   "note: n\nexit: 0\noutcome: fine\n",
		"bad slow":          base + "slow: maybe\n",
		"missing exit":      "note: n\noutcome: ok\n",
		"missing outcome":   "note: n\nexit: 0\n",
		"missing note":      "exit: 0\noutcome: ok\n",
	}
	for name, spec := range bad {
		_, err := corpus.ParseSpec("case", []byte(spec))
		if !errors.Is(err, corpus.ErrBadSpec) {
			t.Errorf("%s: ParseSpec = %v, want ErrBadSpec", name, err)
		} else if !strings.Contains(err.Error(), "case case") {
			t.Errorf("%s: error %q does not name the case", name, err)
		}
	}
}

func TestLoadCaseRefusesBrokenCases(t *testing.T) {
	write := func(dir, name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()

	noSpec := filepath.Join(root, "nospec")
	write(noSpec, "main.go", "package main\n")
	if _, err := corpus.LoadCase(noSpec); !errors.Is(err, corpus.ErrBadSpec) {
		t.Errorf("case without case.txt: %v, want ErrBadSpec", err)
	}

	noStdin := filepath.Join(root, "nostdin")
	write(noStdin, "main.go", "package main\n")
	write(noStdin, "case.txt", "note: n\nstdin: input.txt\nexit: 0\noutcome: ok\n")
	if _, err := corpus.LoadCase(noStdin); !errors.Is(err, corpus.ErrBadSpec) || !strings.Contains(err.Error(), "input.txt") {
		t.Errorf("case with a missing stdin file: %v, want ErrBadSpec naming input.txt", err)
	}

	onlySpec := filepath.Join(root, "onlyspec")
	write(onlySpec, "case.txt", "note: n\nexit: 0\noutcome: ok\n")
	if _, err := corpus.LoadCase(onlySpec); !errors.Is(err, corpus.ErrBadSpec) {
		t.Errorf("case with no files: %v, want ErrBadSpec", err)
	}

	good := filepath.Join(root, "good")
	write(good, "main.go", "package main\n")
	write(good, "sub/x.go", "package sub\n")
	write(good, "case.txt", "note: n\nexit: 0\noutcome: ok\n")
	c, err := corpus.LoadCase(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 2 || c.Files[0].Path != "main.go" || c.Files[1].Path != "sub/x.go" {
		t.Errorf("files = %+v, want main.go and sub/x.go", c.Files)
	}

	if _, err := corpus.Load(filepath.Join(root, "missing")); err == nil {
		t.Error("Load of a missing directory succeeded")
	}
}

func TestNormalize(t *testing.T) {
	const host = "/tmp/TestX123/hello-456"
	tests := []struct{ in, want string }{
		{"\t/tmp/TestX123/hello-456/main.go:7 +0x1d\n", "\t/app/main.go:7 +0x1d\n"},
		{"--- PASS: TestA (0.00s)\n    --- FAIL: TestA/sub (12.34s)\n", "--- PASS: TestA (T)\n    --- FAIL: TestA/sub (T)\n"},
		{"--- SKIP: TestB (1s)\n", "--- SKIP: TestB (T)\n"},
		{"ok  \texample.com/x\t0.003s\n", "ok  \texample.com/x\tT\n"},
		{"ok  \texample.com/x\t(cached)\n", "ok  \texample.com/x\tT\n"},
		{"ok  \texample.com/x\t0.010s\tcoverage: 80.0% of statements\n", "ok  \texample.com/x\tT\tcoverage: 80.0% of statements\n"},
		{"FAIL\texample.com/x\t0.004s\n", "FAIL\texample.com/x\tT\n"},
		{"FAIL\texample.com/x [build failed]\n", "FAIL\texample.com/x [build failed]\n"},
		{"BenchmarkFib-2   \t       1\t      2345 ns/op\t  16 B/op\t 1 allocs/op\n", "BenchmarkFib <measurements>\n"},
		{"BenchmarkJoin \t 1000\t 3.5 ns/op\n", "BenchmarkJoin <measurements>\n"},
		{"cannot write /tmp/go-build123456/b001/exe/main\n", "cannot write $WORK/b001/exe/main\n"},
		{"main.f({0xc000012345, 0x3a6dd19120a8})\n", "main.f({0xADDR, 0xADDR})\n"},
		{"goroutine 20 [running]:\ncreated by testing.(*T).Run in goroutine 1\n", "goroutine N [running]:\ncreated by testing.(*T).Run in goroutine N\n"},
		{"main.go:7:2: lookup disabled\n\n[go-runtime-sandbox: this sandbox has no network; see docs.]\n", "main.go:7:2: lookup disabled\n"},
		// Program output that merely looks like a timing stays.
		{"work(2s): context deadline exceeded\n", "work(2s): context deadline exceeded\n"},
		{"took (1.5s) to run\n", "took (1.5s) to run\n"},
		{"ff 0x1f\n", "ff 0x1f\n"},
	}
	for _, tt := range tests {
		if got := corpus.Normalize(tt.in, host); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDiff(t *testing.T) {
	if d := corpus.Diff("a\nb\n", "a\nb\n"); d != "" {
		t.Errorf("equal inputs: %q", d)
	}
	d := corpus.Diff("1\n2\n3\n4\n5\n6\n", "1\n2\n3\n4\nfive\n6\n")
	for _, want := range []string{"first difference at line 5", `>   5 "5\n"`, `>   5 "five\n"`, `    2 "2\n"`} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, `"1\n"`) {
		t.Errorf("diff shows more than 3 lines of context:\n%s", d)
	}
	// A missing final newline is a visible difference.
	d = corpus.Diff("done\n", "done")
	if !strings.Contains(d, `"done\n"`) || !strings.Contains(d, `"done"`) {
		t.Errorf("final newline difference not shown:\n%s", d)
	}
	// One side shorter.
	d = corpus.Diff("a\nb\nc\n", "a\n")
	if !strings.Contains(d, "line 2") || !strings.Contains(d, "ends after line 1") {
		t.Errorf("truncated side not shown:\n%s", d)
	}
}

func TestCompare(t *testing.T) {
	c := corpus.Case{Name: "x", CompareStderr: true, WantExit: 1, WantOutcome: goruntime.OutcomePanic}
	const hostDir = "/tmp/h/x-1"
	host := corpus.Observed{Stdout: "ok  \tx\t0.001s\n", Stderr: "\t/tmp/h/x-1/main.go:3\n", ExitCode: 1, Outcome: goruntime.OutcomePanic}
	same := corpus.Observed{Stdout: "ok  \tx\t(cached)\n", Stderr: "\t/app/main.go:3\n", ExitCode: 1, Outcome: goruntime.OutcomePanic}
	if ms := corpus.Compare(c, host, hostDir, same); len(ms) != 0 {
		t.Errorf("equal after normalization, got %v", ms)
	}
	if ms := corpus.CheckOracle(c, host); len(ms) != 0 {
		t.Errorf("oracle matches its spec, got %v", ms)
	}

	other := corpus.Observed{Stdout: "FAIL\n", Stderr: "boom\n", ExitCode: 2, Outcome: goruntime.OutcomeRuntimeError}
	ms := corpus.Compare(c, host, hostDir, other)
	var whats []string
	for _, m := range ms {
		whats = append(whats, m.What)
	}
	if got := strings.Join(whats, ","); got != "exit code,outcome,stdout,stderr" {
		t.Errorf("mismatches = %s, want exit code,outcome,stdout,stderr", got)
	}
	c.CompareStderr = false
	if ms := corpus.Compare(c, host, hostDir, corpus.Observed{Stdout: same.Stdout, Stderr: "other", ExitCode: 1, Outcome: goruntime.OutcomePanic}); len(ms) != 0 {
		t.Errorf("stderr compared though the case does not ask: %v", ms)
	}
	if ms := corpus.CheckOracle(c, other); len(ms) != 2 {
		t.Errorf("CheckOracle = %v, want exit code and outcome mismatches", ms)
	}
}

// TestRunHost runs the oracle on small shell-only cases: exit codes,
// signals, stdin, env, timeouts and invalid UTF-8.
func TestRunHost(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	mk := func(command string, timeout time.Duration, files ...goruntime.File) corpus.Case {
		c := corpus.Case{Name: "sh", Command: command, Timeout: timeout, Env: map[string]string{"CORPUS_X": "x y"}}
		c.Files = append([]goruntime.File{{Path: "data/in.txt", Data: []byte("from stdin\n")}}, files...)
		return c
	}
	tests := []struct {
		name    string
		c       corpus.Case
		stdout  string
		exit    int
		outcome goruntime.Outcome
	}{
		{"exit code", mk("echo out; echo err >&2; exit 3", time.Minute), "out\n", 3, goruntime.OutcomeRuntimeError},
		{"files and env", mk(`cat data/in.txt; echo "$CORPUS_X $GOPROXY $GOFLAGS"; pwd | grep -c sh-`, time.Minute), "from stdin\nx y off -mod=mod\n1\n", 0, goruntime.OutcomeOK},
		{"signal", mk("kill -9 $$", time.Minute), "", 137, goruntime.OutcomeRuntimeError},
		{"timeout", mk("echo started; sleep 30", 300*time.Millisecond), "started\n", 124, goruntime.OutcomeTimeout},
		{"invalid utf-8", mk(`printf 'a\377\376b\346\227\n'`, time.Minute), "a\uFFFD\uFFFDb\uFFFD\uFFFD\n", 0, goruntime.OutcomeOK},
		{"no stdin", mk("wc -c", time.Minute), "0\n", 0, goruntime.OutcomeOK},
	}
	withStdin := mk("tr a-z A-Z", time.Minute)
	withStdin.Stdin = "data/in.txt"
	tests = append(tests, struct {
		name    string
		c       corpus.Case
		stdout  string
		exit    int
		outcome goruntime.Outcome
	}{"stdin", withStdin, "FROM STDIN\n", 0, goruntime.OutcomeOK})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			o, dir, err := corpus.RunHost(ctx, tt.c, tmp)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(dir, tmp) {
				t.Errorf("ran in %s, not under %s", dir, tmp)
			}
			if o.Stdout != tt.stdout || o.ExitCode != tt.exit || o.Outcome != tt.outcome {
				t.Errorf("got stdout %q exit %d outcome %s (stderr %q), want %q %d %s",
					o.Stdout, o.ExitCode, o.Outcome, o.Stderr, tt.stdout, tt.exit, tt.outcome)
			}
			if tt.name == "timeout" && time.Since(start) > 10*time.Second {
				t.Errorf("the timeout did not kill the command (took %v)", time.Since(start))
			}
		})
	}
}

// fakeSandbox answers every command with out on stdout, exit code 0; it
// records the requests it got.
type fakeSandbox struct {
	out  string
	reqs []goruntime.ExecRequest
}

func (f *fakeSandbox) ID() string { return "fake" }
func (f *fakeSandbox) Exec(_ context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	f.reqs = append(f.reqs, req)
	if strings.HasPrefix(req.Command, "tar ") {
		return &goruntime.ExecResult{}, nil
	}
	return &goruntime.ExecResult{Stdout: f.out}, nil
}
func (f *fakeSandbox) WriteFile(context.Context, string, io.Reader) error { return nil }
func (f *fakeSandbox) ReadFile(context.Context, string) ([]byte, error) {
	return nil, goruntime.ErrNotExist
}
func (f *fakeSandbox) List(context.Context, string) ([]goruntime.FileInfo, error) {
	return nil, goruntime.ErrNotExist
}
func (f *fakeSandbox) Close(context.Context) error      { return nil }
func (f *fakeSandbox) Disconnect(context.Context) error { return nil }

func TestRunSession(t *testing.T) {
	ctx := context.Background()
	c := corpus.Case{Name: "x", Command: "go run .", Stdin: "in.txt", Timeout: 7 * time.Second,
		Env: map[string]string{"A": "1"}, Files: []goruntime.File{{Path: "main.go"}, {Path: "in.txt"}}}

	fake := &fakeSandbox{out: "hello\n"}
	s := goruntime.NewSession(fake, goruntime.Options{HeadBytes: -1, TailBytes: -1})
	got, err := corpus.RunSession(ctx, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stdout != "hello\n" || got.ExitCode != 0 || got.Outcome != goruntime.OutcomeOK {
		t.Errorf("observed %+v", got)
	}
	last := fake.reqs[len(fake.reqs)-1]
	if last.Command != c.Script() || last.Timeout != 7*time.Second || last.Env["A"] != "1" {
		t.Errorf("the sandbox got %+v, want the case's script, timeout and env", last)
	}

	// A session that cuts output cannot be compared: RunSession refuses it.
	fake = &fakeSandbox{out: strings.Repeat("x", 64<<10)}
	s = goruntime.NewSession(fake, goruntime.Options{})
	if _, err := corpus.RunSession(ctx, s, c); err == nil || !strings.Contains(err.Error(), "elided") {
		t.Errorf("RunSession with a truncating session = %v, want an error about elided output", err)
	}
}

// TestRunOnFakeBackend: Run runs each case on the host and in the
// backend's sandboxes and counts the cases run and passed; with the fake
// backend (the host itself) every case passes, two sandboxes are opened,
// and all are closed when Run returns.
func TestRunOnFakeBackend(t *testing.T) {
	dir := t.TempDir()
	for name, spec := range map[string]string{
		"echo":  "note: prints\ncommand: echo hi; echo \"$X\" >&2\nenv: X=y\ncompare: stdout stderr\nexit: 0\noutcome: ok\n",
		"exit3": "note: exits 3\ncommand: cat data.txt; exit 3\nexit: 3\noutcome: runtime_error\n",
		"slow":  "note: slow\ncommand: true\nexit: 0\noutcome: ok\nslow: true\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, corpus.SpecFile), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "data.txt"), []byte("data of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := goruntimetest.New(t.TempDir())
	sum := corpus.Run(t, b, corpus.RunOptions{Dir: dir})
	if sum != (corpus.Summary{Passed: 2, Total: 2}) {
		t.Errorf("Run = %+v, want 2 of 2 (the slow case skipped)", sum)
	}
	if b.Opened() != 2 || b.Live() != 0 {
		t.Errorf("opened %d sandboxes, %d still open; want 2 and 0", b.Opened(), b.Live())
	}
	if sum := corpus.Run(t, b, corpus.RunOptions{Dir: dir, Only: "exit", Sandboxes: 1}); sum != (corpus.Summary{Passed: 1, Total: 1}) {
		t.Errorf("Run(Only: exit) = %+v, want 1 of 1", sum)
	}
	if sum := corpus.Run(t, b, corpus.RunOptions{Dir: dir, Cases: []string{"exit3", "slow"}}); sum != (corpus.Summary{Passed: 1, Total: 1}) {
		t.Errorf("Run(Cases: exit3, slow) = %+v, want 1 of 1 (the slow case skipped)", sum)
	}
}
