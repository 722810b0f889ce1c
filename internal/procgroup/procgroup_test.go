package procgroup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// TestRunEndsWhatTheCommandStarted: a command killed by its context has
// left a child writing into a file (the go command's compile and gcc
// children do this to the seed build's cache); once Run returns, that
// child is gone and the file no longer changes.
func TestRunEndsWhatTheCommandStarted(t *testing.T) {
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "out"), filepath.Join(dir, "pid")
	script := `(while :; do echo x >> "$1"; sleep 0.01; done) & echo $! > "$2"; sleep 600`
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script, "sh", out, pidFile)
	if err := Run(cmd); err == nil {
		t.Fatal("Run of a command its context killed returned no error")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the command's child wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	if st, err := procfs.ReadStat(pid); err == nil && st.State != 'Z' {
		t.Errorf("the command's child %d is still running after Run returned", pid)
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command's child wrote nothing: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if after, _ := os.ReadFile(out); len(after) != len(before) {
		t.Errorf("the file the child wrote kept growing after Run returned (%d -> %d bytes)", len(before), len(after))
	}
}

// TestRunAfterNormalExit: a command that ends by itself returns its own
// result, with nothing to reap.
func TestRunAfterNormalExit(t *testing.T) {
	if err := Run(exec.CommandContext(t.Context(), "/bin/true")); err != nil {
		t.Errorf("Run(true) = %v", err)
	}
	err := Run(exec.CommandContext(t.Context(), "/bin/false"))
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("Run(false) = %v, want exit status 1", err)
	}
}
