package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// buildDemo builds this command the way a user's `go build` would, so the
// test runs the same binary (which re-executes itself as the sandbox's
// runtime server).
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stepTimeout is the demo's --step-timeout in these tests: a fresh state
// directory has no seed build cache, and the first go run compiles the
// standard library packages it needs itself, which took a busy 2-CPU
// machine past the default 2 minutes. The tests check the flows, not how
// fast the machine runs them.
const stepTimeout = "--step-timeout=20m"

func TestDemoBothFlowsLocal(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap not found: run `bash scripts/install-deps.sh` (installs bubblewrap)")
	}
	bin := buildDemo(t)
	cmd := exec.Command(bin, append([]string{"--state-dir", localtest.StateDir(t), stepTimeout}, localtest.Flags(t)...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"=== single-file smoke flow ===",
		"-- go run main.go [exit=0] --",
		"sum(1..100)=5050",
		"-- ./app [exit=0] --",
		"=== multi-file module flow ===",
		"Hello, Alice!", "Hello, Bob!", "Hello, Carol!",
		"ok  \texample.com/hello/greet",
		"==> PoC complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "provisioning local sandbox") {
		t.Errorf("demo did not report provisioning on stderr:\n%s", stderr.String())
	}
	// A fresh state directory: the sandbox opens without waiting for the
	// seed build cache, and the demo says so once.
	want := "seed build cache: building the standard library once for this machine; this call compiles what it needs meanwhile"
	if n := strings.Count(stderr.String(), want); n != 1 {
		t.Errorf("demo said %d times that the seed build cache is being built (%q) on stderr, want once:\n%s", n, want, stderr.String())
	}
}

// --flow=fork: one failing test, a snapshot, three forks each trying a
// fix, the three results side by side; the original keeps failing.
func TestDemoForkFlowLocal(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap not found: run `bash scripts/install-deps.sh` (installs bubblewrap)")
	}
	bin := buildDemo(t)
	// A fresh state directory has no seed build cache yet: the first go
	// test compiles the standard library it needs, minutes on a busy machine.
	cmd := exec.Command(bin, append([]string{"--state-dir", localtest.StateDir(t), "--flow=fork", "--step-timeout=10m"}, localtest.Flags(t)...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo --flow=fork: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"test_failed in", "-- snapshot ", "-- forked 3 ways in",
		"negate when negative  ok", "always negate         test_failed", "use math.Abs          build_failed",
		"still fails its test", "==> fork flow complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo --flow=fork output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoKeepThenClaim(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap not found: run `bash scripts/install-deps.sh` (installs bubblewrap)")
	}
	bin := buildDemo(t)
	state := localtest.StateDir(t)
	args := func(more ...string) []string {
		return append(append([]string{"--state-dir", state, "--flow=smoke", stepTimeout}, localtest.Flags(t)...), more...)
	}
	out, err := exec.Command(bin, args("--keep")...).CombinedOutput()
	if err != nil {
		t.Fatalf("demo --keep: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "reattach with --claim=")
	if !ok {
		t.Fatalf("demo --keep printed no claim:\n%s", out)
	}
	id := strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
	// The reattached sandbox still holds the binary the first run built.
	out, err = exec.Command(bin, args("--claim="+id)...).CombinedOutput()
	if err != nil {
		t.Fatalf("demo --claim=%s: %v\n%s", id, err, out)
	}
	if !strings.Contains(string(out), "==> PoC complete") {
		t.Fatalf("demo --claim output lacks the end line:\n%s", out)
	}
	// Without --keep the second run deleted the sandbox: attaching fails.
	out, err = exec.Command(bin, args("--claim="+id)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "stage provision") {
		t.Fatalf("attach to a deleted sandbox: err=%v, want a provision-stage failure\n%s", err, out)
	}
}

func TestDemoBadFlags(t *testing.T) {
	bin := buildDemo(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--backend=nowhere"}, 1, `--backend="nowhere"`},
		{[]string{"--no-such-flag"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		// Refused before any sandbox is provisioned: no "provisioning" line.
		{[]string{"--flow=bogus"}, 2, `unknown flow "bogus"`},
		{[]string{"--step-timeout=-1s"}, 2, "must be positive"},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, tt.args...)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != tt.code || !strings.Contains(string(out), tt.want) ||
			tt.code == 2 && strings.Contains(string(out), "provisioning") {
			t.Errorf("demo %q: exit %d, output:\n%s\nwant exit %d and %q", tt.args, cmd.ProcessState.ExitCode(), out, tt.code, tt.want)
		}
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--flow") || !strings.Contains(string(out), "Examples:") {
		t.Errorf("demo --help: %v\n%s", err, out)
	}
}

// TestProgressPrinter: a line at every new step, none for reports in
// between until the interval has passed.
func TestProgressPrinter(t *testing.T) {
	var out strings.Builder
	print := progressPrinter(&out, time.Hour)
	p := goruntime.Progress{Stage: "seed build cache", Message: "compiling", Step: 1, Steps: 4, Total: 100}
	for done := range 50 {
		p.Done = done
		print(p)
	}
	p.Step, p.Message = 2, "vetting"
	print(p)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "step 1/4, 0/100 packages") || !strings.Contains(lines[1], "vetting (step 2/4") {
		t.Errorf("printed:\n%s\nwant one line per step", out.String())
	}
}
