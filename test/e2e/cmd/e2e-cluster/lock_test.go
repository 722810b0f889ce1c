package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The lock protocol of test/e2e/lib.sh that make e2e (run.sh) and make
// cluster (cluster.sh) share, run for real: flock(1) on a lock file of the
// test's own, the marker a make cluster cluster leaves beside it.

type lockFiles struct{ lock, marker string }

func newLockFiles(t *testing.T) lockFiles {
	d := t.TempDir()
	return lockFiles{filepath.Join(d, "e2e.lock"), filepath.Join(d, "e2e.cluster")}
}

func (f lockFiles) cmd(ctx context.Context, script string) *exec.Cmd {
	lib, _ := filepath.Abs("../../lib.sh")
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail; source "+lib+"; "+script)
	cmd.Env = append(os.Environ(), "E2E_LOCK_FILE="+f.lock, "E2E_CLUSTER_MARKER="+f.marker, "E2E_LOCK_POLL=1")
	return cmd
}

// holdLock starts a process that takes the lock as who and keeps it until
// the test ends; it returns its PID.
func (f lockFiles) holdLock(t *testing.T) int {
	t.Helper()
	cmd := f.cmd(context.Background(), "e2e_lock holder; echo locked; exec sleep 120")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// startWaiter runs e2e_lock e2e in the background and returns once it has
// said it waits; done gets its stdout, stderr and error when it ends.
func (f lockFiles) startWaiter(t *testing.T) (done chan waiterResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := f.cmd(ctx, "e2e_lock e2e; echo acquired")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(errPipe)
	first, _ := r.ReadString('\n')
	done = make(chan waiterResult, 1)
	go func() {
		rest := new(strings.Builder)
		_, _ = bufio.NewReader(r).WriteTo(rest)
		err := cmd.Wait()
		done <- waiterResult{stdout.String(), first + rest.String(), err}
	}()
	if !strings.Contains(first, "waiting for it to end") {
		res := <-done
		t.Fatalf("waiter's first words %q, want it to say it waits (stdout %q, err %v)", first, res.stdout, res.err)
	}
	return done
}

type waiterResult struct {
	stdout, stderr string
	err            error
}

func wantRefusalNamingClusterDown(t *testing.T, r waiterResult, dir string) {
	t.Helper()
	if r.err == nil || strings.Contains(r.stdout, "acquired") {
		t.Fatalf("e2e_lock behind a make cluster cluster: took the lock (err %v, stdout %q, stderr %q)", r.err, r.stdout, r.stderr)
	}
	for _, want := range []string{"make cluster", "make cluster-down", dir + "/kubeconfig"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q: %q", want, r.stderr)
		}
	}
}

func TestE2ELockRefusesAtOnceBehindAMakeCluster(t *testing.T) {
	f := newLockFiles(t)
	pid := f.holdLock(t)
	if err := os.WriteFile(f.marker, fmt.Appendf(nil, "%d /var/cache/x/cluster\n", pid), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	cmd := f.cmd(ctx, "e2e_lock e2e; echo acquired")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wantRefusalNamingClusterDown(t, waiterResult{stdout.String(), stderr.String(), err}, "/var/cache/x/cluster")
	if strings.Contains(stderr.String(), "waiting") {
		t.Errorf("said it waits before refusing: %q", stderr.String())
	}
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
}

func TestE2ELockWaitsForAnE2ERunThenTakesIt(t *testing.T) {
	f := newLockFiles(t)
	pid := f.holdLock(t)
	done := f.startWaiter(t)
	select {
	case r := <-done:
		t.Fatalf("waiter ended while the lock was held: %+v", r)
	case <-time.After(2 * time.Second):
	}
	p, _ := os.FindProcess(pid)
	_ = p.Kill()
	r := <-done
	if r.err != nil || r.stdout != "acquired\n" {
		t.Fatalf("after the run ended: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}

// TestE2ELockStopsWaitingWhenAClusterTakesOver: a make e2e waiting behind
// another run must not wait forever once a make cluster cluster holds the
// lock (here the holder's marker appears while the waiter waits).
func TestE2ELockStopsWaitingWhenAClusterTakesOver(t *testing.T) {
	f := newLockFiles(t)
	pid := f.holdLock(t)
	done := f.startWaiter(t)
	if err := os.WriteFile(f.marker, fmt.Appendf(nil, "%d /c\n", pid), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		wantRefusalNamingClusterDown(t, r, "/c")
	case <-time.After(20 * time.Second):
		t.Fatal("still waiting 20 s after a make cluster cluster took the lock")
	}
}

// TestE2ELockIgnoresAStaleMarker: a marker whose process is gone (a
// cluster that was SIGKILLed with its cluster.sh) does not block anyone.
func TestE2ELockIgnoresAStaleMarker(t *testing.T) {
	f := newLockFiles(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.marker, fmt.Appendf(nil, "%d /c\n", gone.Process.Pid), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.cmd(ctx, "e2e_cluster_info || echo not-up; e2e_lock e2e; echo acquired").CombinedOutput()
	if err != nil || string(out) != "not-up\nacquired\n" {
		t.Fatalf("stale marker: %v, %q", err, out)
	}
}
