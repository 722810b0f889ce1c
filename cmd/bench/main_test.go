package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/bench"
)

// TestMain serves as the server section's bare Go HTTP exec server when
// started as one (a copy of this binary, as of cmd/bench).
func TestMain(m *testing.M) {
	bench.ServeIfBareExec()
	os.Exit(m.Run())
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "usage: bench"},
		{[]string{"--sections=disk"}, 2, `unknown section "disk"`},
		{[]string{"--baselines=node"}, 2, `unknown baseline "node"`},
		{[]string{"--rounds=0"}, 2, "--rounds=0"},
		{[]string{"--sections=rootless", "--rootless-uid=0"}, 2, "--rootless-uid=0"},
		{[]string{"stray"}, 2, "unexpected arguments"},
		{[]string{"--sections=scale", "--scale-sizes=200,50"}, 2, "ascending"},
		{[]string{"--sections=scale", "--scale-sizes=50,x"}, 2, `"x" is not a number`},
		{[]string{"--sections=batch", "--batch-size=1"}, 2, "--batch-size=1"},
		{[]string{"--sections=mcp-load", "--mcp-sessions=0"}, 2, "--mcp-sessions=0"},
	}
	for _, c := range cases {
		var out, errs strings.Builder
		code := run(context.Background(), c.args, &out, &errs)
		if code != c.code || !strings.Contains(out.String()+errs.String(), c.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d mentioning %q", c.args, code, out.String()+errs.String(), c.code, c.want)
		}
	}
}

// TestServerSection runs the server section for real, one round: our
// built sandbox-server against a bare exec and, when Debian's FastAPI is
// installed (scripts/install-deps.sh), upstream's Python runtime. Missed
// targets (exit 1) are fine on a busy machine; a missing figure is not.
func TestServerSection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the servers")
	}
	// Bounded by the test binary's -timeout, not a time of its own: the
	// servers' builds alone took over 5 minutes on a busy 2-CPU machine.
	ctx := t.Context()
	baselines := ""
	python := exec.Command("/usr/bin/python3", "-c", "import fastapi, uvicorn, multipart").Run() == nil
	if python {
		baselines = "python"
	}
	var out, errs strings.Builder
	code := run(ctx, []string{"--sections=server", "--rounds=1", "--baselines=" + baselines}, &out, &errs)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	table := out.String()
	want := []string{"machine: ", "| server: /execute `true` round trip, p50", "bare exec.Command", "bare Go HTTP exec server: ", "| server: idle RSS", "MiB"}
	if python {
		want = append(want, "upstream python runtime: ", "x faster", "| server: download 32 MiB (/download), p50")
	} else {
		t.Log("python3-fastapi not installed: the python runtime baseline is not checked")
	}
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s\nstderr:\n%s", w, table, errs.String())
		}
	}
}
