package local_test

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

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// seedBuildHelper builds the extra seed build cache (go test -race and
// -cover) of a state directory holding only the base seed (minutes) and
// is killed meanwhile by TestSeedBuildDiesWithOwner.
func seedBuildHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = b.PrepareExtra(ctx)
	fmt.Fprintln(os.Stderr, "PrepareExtra returned:", err)
	return 1
}

// shareBaseSeed gives stateDir this machine's base seed build cache
// (built once, by whichever test came first), hard-linked (copied across
// file systems), and not the extra seed: a backend there builds that.
func shareBaseSeed(t *testing.T, stateDir string) {
	t.Helper()
	b, err := local.New(testOptions())
	if err != nil {
		t.Fatalf("local backend unavailable (run scripts/install-deps.sh): %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	err = b.Prepare(ctx)
	// Close at once: it stops the extra seed's build that Prepare starts.
	if err := b.Close(context.Background()); err != nil {
		t.Errorf("close backend: %v", err)
	}
	if err != nil {
		t.Fatalf("prepare seed build cache: %v", err)
	}
	complete, _ := filepath.Glob(filepath.Join(b.StateDir(), "seed", "*", ".complete"))
	seed := filepath.Join(stateDir, "seed")
	if err := os.Mkdir(seed, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range complete {
		src := filepath.Dir(c)
		if strings.Contains(filepath.Base(src), "-extra") {
			continue
		}
		if err := linkTree(src, filepath.Join(seed, filepath.Base(src))); err != nil {
			t.Fatalf("share the seed %s: %v", src, err)
		}
		return
	}
	t.Fatalf("no complete base seed in %s after Prepare", b.StateDir())
}

// childrenOf lists pid's child processes.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// startSeedBuild starts a helper that builds the extra seed in stateDir
// and returns it, with the go command it runs for go test -race once that
// command has started a child of its own (a compile). That step is the
// long one, and prints nothing until it ends: a go command printing as
// it goes (go build -v) dies of SIGPIPE on its next line once its owner
// is gone.
func startSeedBuild(t *testing.T, stateDir string) (helper *exec.Cmd, exited <-chan struct{}, goCmd int) {
	t.Helper()
	helper = helperCmd("seed-build", "LOCAL_TEST_STATE_DIR="+stateDir)
	var stderr strings.Builder
	helper.Stderr = &stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = helper.Wait(); close(done) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for _, c := range childrenOf(helper.Process.Pid) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c))
			args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			if strings.TrimSpace(string(comm)) == "go" && strings.Contains(string(args), "\x00-race\x00") && len(childrenOf(c)) > 0 {
				return helper, done, c
			}
		}
		select {
		case <-done:
			t.Fatalf("the helper exited before its seed build compiled for go test -race: %s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = helper.Process.Kill()
			t.Fatalf("the helper's seed build compiled nothing for go test -race within 3 minutes: %s", stderr.String())
		}
	}
}

// killAndWaitGone SIGKILLs the helper and waits until the process group
// of its go command runs nothing: not the go command, not what it
// started. The deadline is generous; it checks that they go, not how
// fast.
func killAndWaitGone(t *testing.T, helper *exec.Cmd, exited <-chan struct{}, goCmd int) {
	t.Helper()
	st, err := procfs.ReadStat(goCmd)
	if err != nil {
		t.Fatalf("the go command %d: %v", goCmd, err)
	}
	pgid := st.Pgrp
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(time.Minute)
	for {
		running, err := procfs.GroupRunning(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if !running {
			return
		}
		if time.Now().After(deadline) {
			alive := "gone"
			if procfs.Alive(goCmd, st.StartTime) {
				alive = "still running"
			}
			t.Fatalf("a minute after its owner was killed, the seed build's process group %d still runs (the go command %d: %s)", pgid, goCmd, alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSeedBuildDiesWithOwner: a process building the extra seed build
// cache (what mcp-server does in the background after its start) is
// killed with SIGKILL during its go test -race; the go command it ran and
// the compiles that command started end with it. Before, the go command
// built on as the user for about a minute (~50 s in the issue), and the
// next process, finding the build's lock free, took its build directory
// for a dead one's while it was still being written. The next build of
// the same state directory then removes what the killed one left (its
// build directory; what it compiled is kept to resume from), and dies
// with its owner as well.
func TestSeedBuildDiesWithOwner(t *testing.T) {
	if gcc, err := exec.LookPath("gcc"); err != nil || !strings.HasPrefix(gcc, "/usr/") {
		t.Skip("no gcc under /usr: the extra seed has no go test -race step here")
	}
	stateDir := localtest.StateDir(t)
	shareBaseSeed(t, stateDir)
	helper, exited, goCmd := startSeedBuild(t, stateDir)
	killAndWaitGone(t, helper, exited, goCmd)
	left, _ := filepath.Glob(filepath.Join(stateDir, "seed", "build-*"))
	if len(left) != 1 {
		t.Fatalf("build directories after the owner was killed: %v; want the killed build's", left)
	}

	helper, exited, goCmd = startSeedBuild(t, stateDir)
	if _, err := os.Stat(left[0]); err == nil {
		t.Errorf("the next build left the killed build's directory %s", left[0])
	}
	killAndWaitGone(t, helper, exited, goCmd)
}
