package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// serverPath is the sandbox-server binary TestMain builds.
var serverPath string

// helperEnv makes the test binary act as a separate process that opens a
// sandbox (see runHelper), for the tests that need "another process".
const helperEnv = "LOCAL_TEST_HELPER"

func TestMain(m *testing.M) {
	// TestExecStreamReExecutedServer's sandbox runs this binary as its
	// server.
	local.ServeIfChild()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	dir, err := os.MkdirTemp("", "local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The process API companion goes next to the server, where the
	// backend looks for it.
	serverPath = filepath.Join(dir, "sandbox-server")
	// Static, as make build builds them (docs/local-backend.md, "Which
	// server runs").
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/go-runtime-sandbox/go-runtime-sandbox/cmd/sandbox-server",
		"github.com/go-runtime-sandbox/go-runtime-sandbox/cmd/sandbox-processapi")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sandbox-server and sandbox-processapi: %v\n%s", err, out)
		os.Exit(1)
	}
	if note := localtest.Note(); note != "" {
		fmt.Fprintln(os.Stderr, "local tests:", note)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testOptions are the options every test starts from. The state directory
// is $LOCAL_TEST_STATE_DIR, else the default one, where the seed build
// cache is built once per machine, not once per run. make unit sets it to
// a fresh, empty directory (scripts/fresh-state-dir.sh): no test may rely
// on what an earlier run or another test left there; a test that needs a
// spare or the extra seed makes it or waits for the backend to.
//
// The warm pool is off (most tests make their own backend, and a pool of
// started sandboxes per backend would only load the machine); the pool's
// own tests turn it on.
func testOptions() local.Options {
	return local.Options{ServerPath: serverPath, StateDir: os.Getenv("LOCAL_TEST_STATE_DIR"), WarmPool: -1, Relax: localtest.Here()}
}

// smallDisk gives opts a 64 MiB disk for a test of what the memory limit
// bounds: a disk in memory (a backend that is not root) raises the memory
// limit by its size (local.ChargedMemory), and the default 4 GiB would
// dwarf the memory under test.
func smallDisk(opts local.Options) local.Options {
	opts.DiskBytes, opts.DiskInodes = 64<<20, 16384
	return opts
}

// newBackend returns a backend with the seed prepared. Missing bubblewrap
// fails the test with the install hint.
func newBackend(tb testing.TB, opts local.Options) *local.Backend {
	tb.Helper()
	b, err := local.New(opts)
	if err != nil {
		tb.Fatalf("local backend unavailable (run scripts/install-deps.sh): %v", err)
	}
	ctx, cancel := context.WithCancel(tb.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	tb.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			tb.Errorf("close backend: %v", err)
		}
	})
	if err := b.Prepare(ctx); err != nil {
		tb.Fatalf("prepare seed build cache: %v", err)
	}
	return b
}

// openSession opens a session and closes it when the test ends.
func openSession(tb testing.TB, b *local.Backend) *goruntime.Session {
	tb.Helper()
	ctx := context.Background()
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

// run executes command and fails the test on a transport error.
func run(tb testing.TB, s *goruntime.Session, req goruntime.Request) *goruntime.Result {
	tb.Helper()
	if req.Timeout == 0 {
		req.Timeout = 3 * time.Minute
	}
	res, err := s.Execute(context.Background(), req)
	if err != nil {
		tb.Fatalf("execute %q: %v", req.Command, err)
	}
	return res
}

// mustOK runs command and fails unless it exits 0.
func mustOK(tb testing.TB, s *goruntime.Session, req goruntime.Request) *goruntime.Result {
	tb.Helper()
	res := run(tb, s, req)
	if res.ExitCode != 0 {
		tb.Fatalf("%q: exit %d, outcome %s\nstdout: %s\nstderr: %s", req.Command, res.ExitCode, res.Outcome, res.Stdout, res.Stderr)
	}
	return res
}

const helloMain = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"

// runHelper is the body of the helper process. Modes:
//
//	open-exit:  open a sandbox, print its ID, exit without closing it.
//	disconnect: open a sandbox, write a file, disconnect, print its ID, exit.
//	handle-killed: create a handle (handles_test.go), write a file, print
//	            the handle's ID and sandbox directory, SIGKILL itself.
//	spares-exit: open a sandbox, wait for the spare disks (if the backend
//	            makes them) to be ready, print its ID, exit without closing
//	            the sandbox or the backend.
//	rootless:   run as a user other than root, run the attacker battery and
//	            report what its sandboxes' limits did (rootlesshelper_test.go).
//	rootless-plain: as a user other than root, open a sandbox and report
//	            whose its files are (rootlesshelper_test.go).
//	memory-budget: as a user, open sandboxes past the memory budget and
//	            fill them (budget_test.go).
//	subid-squat: as a user with subordinate ids, New and print whether it
//	            refused (subidsquat_test.go).
//	subid-takeover: as a user with subordinate ids, open a sandbox, wait,
//	            open another, and print whose their files are
//	            (subidtakeover_test.go).
//	seed-build: build the extra seed build cache in its state directory
//	            until killed (diewithparent_test.go).
//	cpu-weight: open a sandbox from a cpu cgroup of its own at a nice
//	            value, print its ID, close it at the end of stdin
//	            (cpuweight_test.go).
//	descriptors: started holding a launcher's descriptors, open a sandbox,
//	            report which reached its commands, print its processes
//	            and keep it until stdin ends (descriptors_test.go).
//	seedless:   as a user other than root, open a sandbox and go run hello
//	            world while the seed cannot complete (seedless_test.go).
func runHelper(mode string) int {
	ctx := context.Background()
	opts := local.Options{ServerPath: os.Getenv("LOCAL_TEST_SERVER"), StateDir: os.Getenv("LOCAL_TEST_STATE_DIR"), Relax: localtest.Here()}
	if v := os.Getenv("LOCAL_TEST_ALLOW_MODULES"); v != "" {
		opts.AllowModules, opts.ModCache = strings.Split(v, ","), os.Getenv("LOCAL_TEST_MODCACHE")
	}
	switch mode {
	case "pool-wait":
		return poolHelper(ctx, opts)
	case "rootless":
		return rootlessHelper(ctx, opts)
	case "memory-budget":
		return budgetHelper(ctx, opts)
	case "handle-killed":
		return handleHelper(ctx, opts)
	case "rootless-plain":
		return rootlessPlainHelper(ctx, opts)
	case "subid-squat":
		return squatHelper(ctx, opts)
	case "subid-takeover":
		return takeoverHelper(ctx, opts)
	case "descriptors":
		return descriptorsHelper(ctx, opts)
	case "seed-build":
		return seedBuildHelper(ctx, opts)
	case "cpu-weight":
		return cpuWeightHelper(ctx, opts)
	case "seedless":
		return seedlessHelper(ctx, opts)
	case "snapshots":
		return snapshotsHelper(ctx, opts)
	}
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "open-exit":
		fmt.Println(s.ID())
		return 0
	case "spares-exit":
		for deadline := time.Now().Add(time.Minute); localtest.Here().DiskQuota == false; time.Sleep(50 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(b.StateDir(), "disks", "spare", "*", "*")); len(m) >= 2 || time.Now().After(deadline) {
				break
			}
		}
		fmt.Println(s.ID())
		return 0
	case "disconnect":
		if _, err := s.Execute(ctx, goruntime.Request{Files: []goruntime.File{{Path: "left.txt", Data: []byte("left behind")}}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := s.Disconnect(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(s.ID())
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// helperCmd is the command of a helper process.
func helperCmd(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "LOCAL_TEST_SERVER="+serverPath), env...)
	return cmd
}

// helper runs the test binary as a helper process, with env added to its
// environment, and returns the sandbox ID it printed.
func helper(t *testing.T, mode string, env ...string) string {
	t.Helper()
	cmd := helperCmd(mode, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v: %s", mode, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
