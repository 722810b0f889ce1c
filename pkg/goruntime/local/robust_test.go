package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestSeedBuildOutlivesCallerTimeout: a caller whose ctx ends while the
// seed build cache is being built gets an error that says so and names the
// fix, and the build goes on: the next Prepare completes it instead of
// starting over. It builds a seed from scratch in a fresh state directory
// (1-3 minutes on 2 cores).
func TestSeedBuildOutlivesCallerTimeout(t *testing.T) {
	opts := testOptions()
	opts.StateDir = localtest.StateDir(t)
	b, err := local.New(opts)
	if err != nil {
		t.Fatalf("local backend unavailable (run scripts/install-deps.sh): %v", err)
	}
	// Close ends the extra seed build the second Prepare starts, before
	// the state directory is removed.
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = b.Prepare(ctx)
	cancel()
	if err == nil {
		t.Fatal("Prepare with a 3 s timeout built a seed from scratch; want the still-being-built error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not wrap context.DeadlineExceeded: %v", err)
	}
	for _, want := range []string{"still being built", "next Prepare will reuse it", "give Prepare a later deadline"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	time.Sleep(2 * time.Second)
	builds, _ := filepath.Glob(filepath.Join(opts.StateDir, "seed", "build-*"))
	if len(builds) != 1 {
		t.Fatalf("seed build directories after the caller gave up: %v; want the one build still running", builds)
	}
	ctx, cancel = context.WithCancel(t.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	if err := b.Prepare(ctx); err != nil {
		t.Fatalf("second Prepare: %v", err)
	}
	done, _ := filepath.Glob(filepath.Join(opts.StateDir, "seed", "*", ".complete"))
	if len(done) != 1 {
		t.Errorf("complete seeds: %v, want 1", done)
	}

	// The extra seed build has started in the background. A Close that
	// cancels it keeps what it compiled, and the next build of it starts
	// from there instead of from scratch: a process that never lives as
	// long as the build still gets it done over several runs.
	extraBuild := func() int { return countFiles(t, filepath.Join(opts.StateDir, "seed", "build-*-extra*", "gocache")) }
	deadline := time.Now().Add(10 * time.Minute)
	for extraBuild() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("the extra seed build compiled nothing within 10 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	resume := filepath.Join(opts.StateDir, "seed", "resume-*-extra*")
	kept := countFiles(t, resume)
	if kept < 50 {
		t.Fatalf("after Close cancelled the extra seed build, %d files kept in %s; want what it had compiled", kept, resume)
	}
	// A probe only the kept cache holds: the next build must start from
	// it (its build cache holds the probe), and keep it again when it too
	// is cancelled.
	kept1, _ := filepath.Glob(resume)
	if err := os.WriteFile(filepath.Join(kept1[0], "resume-probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b2, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The build is cancelled once the probe shows it started from the
	// kept cache (or after ten minutes without it), however long a busy
	// machine takes to get there.
	ctx, cancel = context.WithCancel(context.Background())
	prepared := make(chan error, 1)
	go func() { prepared <- b2.PrepareExtra(ctx) }()
	resumed := false
	for deadline := time.Now().Add(10 * time.Minute); !resumed && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(opts.StateDir, "seed", "build-*-extra*", "gocache", "resume-probe"))
		resumed = len(m) > 0
		if len(prepared) > 0 {
			break
		}
	}
	cancel()
	if err := <-prepared; err == nil {
		t.Fatal("PrepareExtra finished the extra seed before the test cancelled it")
	}
	if !resumed {
		t.Error("the next extra seed build did not start from the kept build cache")
	}
	if err := b2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := countFiles(t, resume); again < kept {
		t.Errorf("the second, cancelled extra seed build kept %d files, fewer than the %d it started from", again, kept)
	}
	if _, err := os.Stat(filepath.Join(kept1[0], "resume-probe")); err != nil {
		t.Errorf("the second, cancelled build did not keep its cache for the next: %v", err)
	}
}

// countFiles counts the regular files in the directories matching pattern.
func countFiles(t *testing.T, pattern string) int {
	t.Helper()
	dirs, _ := filepath.Glob(pattern)
	n := 0
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				n++
			}
			return nil
		})
	}
	return n
}

// TestNewRejectsAbsurdLimits: limits a sandbox cannot start under fail in
// New with an error naming the option, instead of an Open that reports the
// sandbox gone.
func TestNewRejectsAbsurdLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*local.Options)
		want []string
	}{
		{"memory", func(o *local.Options) { o.MemoryBytes = 8 << 20 }, []string{"Options.MemoryBytes", "8 MiB", "64 MiB"}},
		{"processes", func(o *local.Options) { o.Processes = 4 }, []string{"Options.Processes", "16"}},
		{"cpus", func(o *local.Options) { o.CPUs = runtime.NumCPU() + 1 }, []string{"Options.CPUs", strconv.Itoa(runtime.NumCPU()) + " CPUs"}},
		{"disk", func(o *local.Options) { o.DiskBytes = 1 << 20 }, []string{"Options.DiskBytes", "1 MiB", "32 MiB"}},
		{"inodes", func(o *local.Options) { o.DiskInodes = 100 }, []string{"Options.DiskInodes", "2048"}},
		{"inode tables", func(o *local.Options) { o.DiskBytes = 64 << 20 }, []string{"Options.DiskInodes", "inode tables", "at most 32768"}},
		{"uid range", func(o *local.Options) { o.HostUIDBase = 1 << 31 }, []string{"Options.HostUIDBase", "2^31"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			tc.set(&opts)
			b, err := local.New(opts)
			if err == nil {
				t.Fatalf("New accepted %+v", opts)
			}
			_ = b
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	// The smallest accepted limits still give a working sandbox.
	opts := testOptions()
	opts.MemoryBytes, opts.Processes, opts.CPUs = local.MinMemoryBytes, local.MinProcesses, runtime.NumCPU()
	s := openSession(t, newBackend(t, opts))
	mustOK(t, s, goruntime.Request{Command: "echo ok; ls / >/dev/null"})
}

// openSandbox opens a sandbox through the backend and closes it when the
// test ends.
func openSandbox(t *testing.T, b *local.Backend) goruntime.Sandbox {
	t.Helper()
	sb, err := b.Open(context.Background())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

// assertGone checks that err wraps ErrSandboxGone, says why, and that
// the call returned before the caller's deadline.
func assertGone(t *testing.T, ctx context.Context, what string, err error, why string) {
	t.Helper()
	if !errors.Is(err, goruntime.ErrSandboxGone) {
		t.Fatalf("%s: error %v does not wrap ErrSandboxGone", what, err)
	}
	if !strings.Contains(err.Error(), why) {
		t.Errorf("%s: error %q does not say %q", what, err, why)
	}
	if ctx.Err() != nil {
		t.Errorf("%s: returned only at the caller's deadline: %v", what, err)
	}
}

// serverPID is the host pid of sb's runtime server.
func serverPID(t *testing.T, sb goruntime.Sandbox) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sb.(*local.Sandbox).Dir(), "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Server int `json:"server_pid"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Server <= 0 {
		t.Fatalf("sandbox.json %s: server pid %d, %v", data, m.Server, err)
	}
	return m.Server
}

// hostSignalServer sends sig to sb's runtime server from the host (outside
// the sandbox's pid namespace: commands cannot stop or kill the server,
// which is the namespace's init) after delay, from a goroutine. The call
// it is meant to land in must outlast any delay a busy machine adds: a
// command that would run for minutes.
func hostSignalServer(t *testing.T, sb goruntime.Sandbox, sig syscall.Signal, delay time.Duration) {
	t.Helper()
	pid := serverPID(t, sb)
	go func() {
		time.Sleep(delay)
		_ = syscall.Kill(pid, sig)
	}()
}

// hostStopServer sends SIGSTOP (or SIGKILL) to sb's runtime server from
// the host and returns once the kernel shows it stopped (or exited), so
// that the next call is the first to find it so, however late the
// machine runs the signal.
func hostStopServer(t *testing.T, sb goruntime.Sandbox, sig syscall.Signal) {
	t.Helper()
	pid := serverPID(t, sb)
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal the runtime server (pid %d): %v", pid, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		st, err := procfs.ReadStat(pid)
		switch {
		case sig == syscall.SIGKILL && (err != nil || st.State == 'Z' || st.State == 'X'):
			return
		case sig == syscall.SIGSTOP && err == nil && st.State == 'T':
			return
		case time.Now().After(deadline):
			t.Fatalf("a minute after %v, the runtime server (pid %d) is in state %q (%v)", sig, pid, st.State, err)
		}
	}
}

// TestStoppedServerReportedGone: a runtime server stopped during a call
// (SIGSTOP, from the host: commands cannot) makes that call, and every
// later one, fail with ErrSandboxGone instead of hanging until the
// caller's deadline.
func TestStoppedServerReportedGone(t *testing.T) {
	sb := openSandbox(t, newBackend(t, testOptions()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hostSignalServer(t, sb, syscall.SIGSTOP, 300*time.Millisecond)
	_, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "sleep 600"})
	assertGone(t, ctx, "execute", err, "stopped answering")
	_, err = sb.Exec(ctx, goruntime.ExecRequest{Command: "true"})
	assertGone(t, ctx, "next execute", err, "stopped answering")
	_, err = sb.ReadFile(ctx, "x")
	assertGone(t, ctx, "read", err, "stopped answering")
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("close after the server stopped: %v", err)
	}
}

// TestKilledServerFirstCallGone: the call during which the runtime server
// died (SIGKILL from the host, or the OOM killer: commands cannot), and
// the first call after it died between calls, report ErrSandboxGone, not
// a raw transport error.
func TestKilledServerFirstCallGone(t *testing.T) {
	b := newBackend(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sb := openSandbox(t, b)
	hostSignalServer(t, sb, syscall.SIGKILL, 300*time.Millisecond)
	_, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "sleep 600"})
	assertGone(t, ctx, "execute while the server is killed", err, "runtime server")
	_, err = sb.List(ctx, ".")
	assertGone(t, ctx, "list after", err, "runtime server")

	// The server dies between calls: the next call is the first to fail.
	sb = openSandbox(t, b)
	hostStopServer(t, sb, syscall.SIGKILL)
	err = sb.WriteFile(ctx, "f.txt", strings.NewReader("data"))
	assertGone(t, ctx, "upload after the server died", err, "runtime server")
}

// TestManySmallProcessesMemoryBomb: a memory bomb of many small
// processes, none bigger than the runtime server, costs the command, not
// the sandbox: it is reported as the memory limit, and the sandbox (with
// its files) goes on.
func TestManySmallProcessesMemoryBomb(t *testing.T) {
	s := openSession(t, newBackend(t, smallDisk(testOptions())))
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "keep.txt", Data: []byte("kept")}}, Command: "cat /proc/$$/oom_score_adj"})
	bomb := `mkfifo ff; for i in $(seq 175); do (x=$(head -c 7000000 /dev/zero | tr "\0" a); read z < ff) & sleep 0.05; done`
	res := run(t, s, goruntime.Request{Command: bomb, Timeout: 2 * time.Minute})
	if res.Outcome != goruntime.OutcomeMemoryLimit {
		t.Errorf("memory bomb: outcome %s (exit %d), want %s; stderr: %s", res.Outcome, res.ExitCode, goruntime.OutcomeMemoryLimit, res.Stderr)
	}
	if got := mustOK(t, s, goruntime.Request{Command: "cat keep.txt"}).Stdout; got != "kept" {
		t.Errorf("after the bomb keep.txt holds %q", got)
	}
}

// TestCommandsAreOOMFirst: commands run with oom_score_adj 1000 over Exec
// and ExecStream, so the OOM killer takes them before the server.
func TestCommandsAreOOMFirst(t *testing.T) {
	sb := openSandbox(t, newBackend(t, testOptions()))
	ctx := context.Background()
	cmd := goruntime.ExecRequest{Command: "sleep 0.3; cat /proc/$$/oom_score_adj"}
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if got := strings.TrimSpace(res.Stdout); got != "1000" {
		t.Errorf("Exec: command oom_score_adj %q (stderr %q), want 1000", got, res.Stderr)
	}
	res, err = sb.(goruntime.StreamingSandbox).ExecStream(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("exec stream: %v", err)
	}
	if got := strings.TrimSpace(res.Stdout); got != "1000" {
		t.Errorf("ExecStream: command oom_score_adj %q (stderr %q), want 1000", got, res.Stderr)
	}
}

// TestAttachStoppedServer: attaching to a disconnected sandbox whose
// runtime server was stopped (SIGSTOP from the host) reports ErrSandboxGone, not
// ErrSandboxNotFound, and ends the sandbox: its bubblewrap exits and its
// directory is removed.
func TestAttachStoppedServer(t *testing.T) {
	b := newBackend(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb := openSandbox(t, b)
	id := sb.(*local.Sandbox).ID()
	dir := sb.(*local.Sandbox).Dir()
	data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.PID <= 0 {
		t.Fatalf("sandbox.json %s: pid %d, %v", data, m.PID, err)
	}
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	hostStopServer(t, sb, syscall.SIGSTOP)

	_, err = b.Attach(ctx, id)
	if errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("attach: %v wraps ErrSandboxNotFound, want ErrSandboxGone", err)
	}
	assertGone(t, ctx, "attach", err, "stopped answering")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory %s still there: %v", dir, err)
	}
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(m.PID, 0) == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.PID)); strings.Contains(string(st), ") Z ") {
			break // a zombie of this test process: exited
		}
		if time.Now().After(deadline) {
			t.Fatalf("bubblewrap (pid %d) still runs after the failed attach", m.PID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = b.Attach(ctx, id)
	if !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("second attach: %v, want ErrSandboxNotFound", err)
	}
}

// TestFilePermissionDenied: a file or directory under /app a command made
// unreadable (mode 000) is reported as fs.ErrPermission, not as a path
// that escapes /app; a real escape stays ErrPathEscape.
func TestFilePermissionDenied(t *testing.T) {
	sb := openSandbox(t, newBackend(t, testOptions()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "echo x > secret && chmod 000 secret && mkdir locked && chmod 000 locked && cat secret"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("the sandbox's user can read a mode-000 file: %+v", res)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fs.ErrPermission) || errors.Is(err, goruntime.ErrPathEscape) {
			t.Errorf("%s: %v, want fs.ErrPermission and not ErrPathEscape", what, err)
		}
	}
	_, err = sb.ReadFile(ctx, "secret")
	check("read a mode-000 file", err)
	_, err = sb.List(ctx, "locked")
	check("list a mode-000 directory", err)
	_, err = sb.ReadFile(ctx, "locked/f")
	check("read under a mode-000 directory", err)
	if _, err := sb.ReadFile(ctx, "../etc/passwd"); !errors.Is(err, goruntime.ErrPathEscape) || errors.Is(err, fs.ErrPermission) {
		t.Errorf("read ../etc/passwd: %v, want ErrPathEscape", err)
	}
	if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("the sandbox no longer works after the refusals: %v", err)
	}
}

// TestDevShmBounded: /dev/shm is a small tmpfs of the sandbox's own. A
// command filling it gets "no space left" at 64 MiB instead of leaving a
// gigabyte of memory-backed files that starve every later command, and
// the sandbox goes on working.
func TestDevShmBounded(t *testing.T) {
	b := newBackend(t, testOptions())
	s := openSession(t, b)
	res := run(t, s, goruntime.Request{Command: "head -c 200000000 /dev/zero > /dev/shm/fill; echo rc=$?; stat -c %s /dev/shm/fill; stat -c %a /dev/shm"})
	if !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("filling /dev/shm: stderr %q, want No space left on device", res.Stderr)
	}
	fields := strings.Fields(res.Stdout)
	if len(fields) != 3 || fields[0] == "rc=0" || fields[2] != "1777" {
		t.Fatalf("stdout %q: want a failed write, the file's size and mode 1777", res.Stdout)
	}
	if n, err := strconv.ParseInt(fields[1], 10, 64); err != nil || n > 64<<20 {
		t.Errorf("/dev/shm/fill holds %s bytes; want at most 64 MiB", fields[1])
	}
	mustOK(t, s, goruntime.Request{Command: "rm /dev/shm/fill && head -c 10000000 /dev/zero > /dev/shm/small && rm /dev/shm/small"})
}
