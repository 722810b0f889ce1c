package procgroup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// helperEnv makes the test binary a process that runs a command with Run
// and is killed meanwhile (TestGroupDiesWithCaller).
const helperEnv = "PROCGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(runHelper(dir))
	}
	os.Exit(m.Run())
}

// runHelper runs, with Run, a shell that starts a long child and writes
// its own pid and the child's into dir, then waits for the child: a
// stand-in for the go command and its compiles. It returns only if Run
// does (it should not: the test kills this process).
func runHelper(dir string) int {
	script := `sleep 600 & echo $! > "$1/child.tmp"; mv "$1/child.tmp" "$1/child"; wait`
	err := Run(exec.CommandContext(context.Background(), "/bin/sh", "-c", script, "sh", dir))
	fmt.Fprintln(os.Stderr, "Run returned:", err)
	return 1
}

// TestRunEndsWhatTheCommandStarted: a command killed by its context has
// left a child writing into a file (the go command's compile and gcc
// children do this to the seed build's cache); once Run returns, that
// child is gone and the file no longer changes.
func TestRunEndsWhatTheCommandStarted(t *testing.T) {
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "out"), filepath.Join(dir, "pid")
	script := `(while :; do echo x >> "$1"; sleep 0.01; done) & echo $! > "$2"; sleep 600`
	// Killed once its child has written its pid and a first line, however
	// late a busy machine runs them (a 300 ms timeout could end the
	// command before it started the child).
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		defer cancel()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			pid, _ := os.ReadFile(pidFile)
			if _, err := os.Stat(out); err == nil && strings.HasSuffix(string(pid), "\n") {
				return
			}
		}
	}()
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

// readPid waits up to a minute for a pid in file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(file); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after a minute", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupDiesWithCaller: a process running a command with Run is
// killed (SIGKILL, as kill -9 of mcp-server during its seed build); the
// command and what it started end with it. Before, both ran on (the
// seed's go command built for another ~50 s); with the parent-death
// signal alone the command ended and its child ran on. The deadline is
// generous: this checks that they go, not how fast.
func TestGroupDiesWithCaller(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+dir)
	var stderr strings.Builder
	helper.Stderr = &stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = helper.Wait(); close(exited) }()
	child := readPid(t, filepath.Join(dir, "child"))
	st, err := procfs.ReadStat(child)
	if err != nil {
		t.Fatalf("the command's child %d: %v", child, err)
	}
	pgid := st.Pgrp
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if strings.Contains(stderr.String(), "Run returned") {
		t.Fatalf("Run returned before the helper was killed: %s", stderr.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		running, err := procfs.GroupRunning(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the process running it was killed, process group %d (the command and its child %d) still runs", pgid, child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
