package bench

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWatchedLog(t *testing.T) {
	w := newWatchedLog("seed ready", "extra ready")
	for _, s := range []string{"level=INFO msg=\"local backend: seed re", "ady; sandboxes…\"\n"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if at, err := w.wait(ctx, "seed ready"); err != nil || at.IsZero() {
		t.Errorf("a text split across writes, arrived before the wait: %v, %v", at, err)
	}
	if _, err := w.wait(ctx, "extra ready"); err == nil {
		t.Error("a text that never arrived was seen")
	}
	if _, err := w.wait(context.Background(), "anything"); err == nil {
		t.Error("a text the log does not watch was waited for")
	}
	if !strings.Contains(w.String(), "seed ready; sandboxes") {
		t.Errorf("the log is not kept whole: %q", w.String())
	}
}

// TestFirstCallRun runs the first-call section for real once, as this
// process's user (root: make unit; the run as another user is the
// section's own, by hand: docs/benchmarks.md), one round: the built
// mcp-server on an empty state directory, its three calls, its seed
// builds to the end, a fresh server on the seeded directory. It checks
// every figure is there, and that a call which waited seconds got
// progress notifications meanwhile; not how fast anything was.
func TestFirstCallRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the seed on an empty state directory (minutes)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the local backend as a user needs root's one-time setup; make unit runs this as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	bins, err := buildOurs(ctx, t.TempDir(), "sandbox-server", "sandbox-processapi", "mcp-server")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	cfg.Rounds = 1
	r := &runner{cfg: cfg, report: &Report{}, bins: bins}
	dir := t.TempDir()
	if err := r.firstCallRun(ctx, firstCallUser{name: "test", env: os.Environ(), uid: -1, dir: dir}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"test: mcp-server started on an empty state directory, initialize answered",
		"test: call 1, run_go_code hello world (",
		"test: mcp-server start to the first result",
		"test: call 2, run_go_code a second program",
		"test: call 3, run_go_code hello world again (",
		`test: "local backend: seed build cache ready", after the server's start`,
		`test: "local backend: extra seed build cache ready", after the server's start`,
		"test: seed complete, first run_go_code of new code of a fresh mcp-server, p50",
	}
	var b strings.Builder
	r.report.Print(&b)
	if len(r.report.Rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(r.report.Rows), len(want), b.String())
	}
	counts := regexp.MustCompile(`\((\d+) progress, (\d+) log notifications meanwhile\)`)
	for i, row := range r.report.Rows {
		if !strings.HasPrefix(row.Figure, want[i]) || row.Ours == "" {
			t.Errorf("row %d: %q = %q, want %q…", i, row.Figure, row.Ours, want[i])
		}
		m := counts.FindStringSubmatch(row.Figure)
		if m == nil {
			continue
		}
		if !strings.HasPrefix(row.Baseline, "bare host go run, GOCACHE empty at the first: ") {
			t.Errorf("row %d: baseline %q", i, row.Baseline)
		}
		took, err := strconv.ParseFloat(strings.TrimSuffix(row.Ours, " s"), 64)
		if err != nil {
			t.Fatalf("row %d: %q: %v", i, row.Ours, err)
		}
		// The server sends progress every second of a call with a token
		// (mcpserver.Config.ProgressInterval); one of 3 s or more got some.
		if n, _ := strconv.Atoi(m[1]); took >= 3 && n == 0 {
			t.Errorf("row %d: a call of %.1f s got no progress notification: %s", i, took, row.Figure)
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("the section left %v in its directory (%v): want its state directory and GOCACHE removed", ents, err)
	}
	t.Logf("\n%s", b.String())
}
