package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// forkBomb is the shell's fork bomb. Its command ends after 3 s, by when
// the process limit has stopped the bomb.
const forkBomb = "bomb() { bomb | bomb & }; bomb; sleep 3"

// memoryBomb fills memory until the limit ends it: tail keeps the last
// line in memory, and /dev/zero has no newline.
const memoryBomb = "tail /dev/zero"

func TestForkBombContained(t *testing.T) {
	opts := testOptions()
	opts.Processes = 64
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: forkBomb, Timeout: 20 * time.Second})
	if res.Outcome != goruntime.OutcomeProcessLimit {
		t.Errorf("fork bomb: outcome %s (exit %d, stderr %.300s), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeProcessLimit)
	}
	if !strings.Contains(res.Stderr, "process limit was hit: 64 processes") || !strings.Contains(res.Stderr, "Options.Processes") {
		t.Errorf("fork bomb: stderr does not end with the note naming the limit and its flag: %q", clipTail(res.Stderr))
	}
	assertLimit(t, s, forkBomb, goruntime.LimitProcesses)
	mustOK(t, s, goruntime.Request{Command: "echo after the bomb"})
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go"})
}

func TestMemoryBombContained(t *testing.T) {
	opts := testOptions()
	opts.MemoryBytes = 256 << 20
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: memoryBomb, Timeout: time.Minute})
	if res.Outcome != goruntime.OutcomeMemoryLimit {
		t.Errorf("memory bomb: outcome %s (exit %d, stderr %.300s), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeMemoryLimit)
	}
	if !strings.Contains(res.Stderr, "memory limit was hit: 256 MiB") || !strings.Contains(res.Stderr, "Options.MemoryBytes") {
		t.Errorf("memory bomb: stderr does not end with the note naming the limit and its flag: %q", clipTail(res.Stderr))
	}
	// A Go memory bomb, built and run in the sandbox.
	prog := "package main\n\nfunc main() {\n\tvar keep [][]byte\n\tfor {\n\t\tb := make([]byte, 16<<20)\n\t\tfor i := range b {\n\t\t\tb[i] = 1\n\t\t}\n\t\tkeep = append(keep, b)\n\t}\n}\n"
	res = run(t, s, goruntime.Request{Files: []goruntime.File{{Path: "bomb.go", Data: []byte(prog)}}, Command: "go build -o bomb bomb.go && ./bomb", Timeout: 2 * time.Minute})
	if res.Outcome != goruntime.OutcomeMemoryLimit {
		t.Errorf("Go memory bomb: outcome %s (exit %d, stderr %.300s), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeMemoryLimit)
	}
	mustOK(t, s, goruntime.Request{Command: "echo after the bomb && ls bomb"})
}

// assertLimit runs command through the Sandbox directly and checks ExecResult.Limit.
func assertLimit(t *testing.T, s *goruntime.Session, command string, want goruntime.Limit) {
	t.Helper()
	er, err := s.Sandbox().Exec(context.Background(), goruntime.ExecRequest{Command: command, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	if er.Limit != want {
		t.Errorf("%q: ExecResult.Limit %q, want %q (exit %d)", command, er.Limit, want, er.ExitCode)
	}
}

func TestFileSizeLimit(t *testing.T) {
	opts := testOptions()
	opts.FileSizeBytes = 1 << 20
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: "head -c 2000000 /dev/zero > big"})
	if res.Outcome != goruntime.OutcomeFileSizeLimit {
		t.Errorf("outcome %s (exit %d, stderr %q), want %s", res.Outcome, res.ExitCode, res.Stderr, goruntime.OutcomeFileSizeLimit)
	}
	// Like the memory, process and disk limits: a note names the limit,
	// its value and where to raise it.
	if want := "file size limit was hit: no single file may grow past 1 MiB (Options.FileSizeBytes)"; !strings.Contains(res.Stderr, want) {
		t.Errorf("stderr %q lacks the note %q", res.Stderr, want)
	}
	assertLimit(t, s, "head -c 2000000 /dev/zero > big2", goruntime.LimitFileSize)
	mustOK(t, s, goruntime.Request{Command: "head -c 500000 /dev/zero > small && wc -c < small"})
}

// TestFileSizeLimitExitZero: a command that runs into RLIMIT_FSIZE but
// exits 0 itself (the shell reports the killed child and goes on; a Go
// program gets EFBIG and prints it to stdout) is still file_size_limit.
func TestFileSizeLimitExitZero(t *testing.T) {
	opts := testOptions()
	opts.FileSizeBytes = 8 << 20 // room for the Go program's binary
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: "head -c 10000000 /dev/zero > big; echo status=$?"})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "status=153") {
		t.Fatalf("exit %d stdout %q stderr %q; want exit 0 and status=153", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Outcome != goruntime.OutcomeFileSizeLimit {
		t.Errorf("shell: outcome %s (stderr %q), want %s", res.Outcome, res.Stderr, goruntime.OutcomeFileSizeLimit)
	}
	assertLimit(t, s, "head -c 10000000 /dev/zero > big2; echo status=$?", goruntime.LimitFileSize)
	prog := `package main

import (
	"fmt"
	"os"
)

func main() {
	if err := os.WriteFile("big", make([]byte, 10<<20), 0o644); err != nil {
		fmt.Println(err)
	}
}
`
	res = run(t, s, goruntime.Request{
		Files:   []goruntime.File{{Path: "main.go", Data: []byte(prog)}},
		Command: "go run main.go",
		Timeout: 3 * time.Minute,
	})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "file too large") {
		t.Fatalf("go program: exit %d stdout %q stderr %q; want exit 0 and EFBIG on stdout", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Outcome != goruntime.OutcomeFileSizeLimit {
		t.Errorf("go program: outcome %s, want %s", res.Outcome, goruntime.OutcomeFileSizeLimit)
	}
}

func TestOutputLimit(t *testing.T) {
	opts := testOptions()
	opts.OutputBytes = 64 << 10
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: "yes | head -c 1000000"})
	if res.Outcome != goruntime.OutcomeOutputLimit || !res.StdoutTruncated {
		t.Errorf("outcome %s, truncated %v; want %s", res.Outcome, res.StdoutTruncated, goruntime.OutcomeOutputLimit)
	}
	assertLimit(t, s, "yes | head -c 1000000", goruntime.LimitOutput)
}

func TestWallTimeLimit(t *testing.T) {
	opts := testOptions()
	opts.ExecTimeout = 2 * time.Second
	s := openSession(t, newBackend(t, opts))
	start := time.Now()
	res := run(t, s, goruntime.Request{Command: "sleep 60", Timeout: time.Second})
	if res.Outcome != goruntime.OutcomeTimeout || res.ExitCode != 124 {
		t.Errorf("outcome %s exit %d, want timeout/124", res.Outcome, res.ExitCode)
	}
	// The sandbox's default (Options.ExecTimeout) applies with no timeout.
	er, err := s.Sandbox().Exec(context.Background(), goruntime.ExecRequest{Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	if !er.TimedOut {
		t.Errorf("default timeout: TimedOut false, exit %d", er.ExitCode)
	}
	// Each sleep 60 was cut short: had either run to its end, the two
	// would have taken a minute or more, however busy the machine.
	if el := time.Since(start); el >= time.Minute {
		t.Errorf("timeouts took %v: a sleep 60 ran to its end", el)
	}
}

// TestGoSettingsMatchLimits: commands get GOMAXPROCS = the sandbox's CPUs
// (the runtime server itself runs with 1: bwrap.go) and GOMEMLIMIT below
// its memory limit.
func TestGoSettingsMatchLimits(t *testing.T) {
	for _, cpus := range []int{1, runtime.NumCPU()} {
		opts := testOptions()
		opts.MemoryBytes = 512 << 20
		opts.CPUs = cpus
		s := openSession(t, newBackend(t, opts))
		res := mustOK(t, s, goruntime.Request{Command: "echo $GOMAXPROCS $GOMEMLIMIT"})
		want := fmt.Sprintf("%d %d", cpus, int64(512<<20)/10*9)
		if strings.TrimSpace(res.Stdout) != want {
			t.Errorf("CPUs %d: GOMAXPROCS GOMEMLIMIT = %q, want %q", cpus, strings.TrimSpace(res.Stdout), want)
		}
	}
}

// TestGoTelemetryOff: the go command in a sandbox runs with telemetry
// off (the mode file the runtime server writes; GOTELEMETRY in the
// environment sets nothing) and leaves no counter files under HOME.
func TestGoTelemetryOff(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	res := mustOK(t, s, goruntime.Request{Command: "go env GOTELEMETRY && go version >/dev/null && ls ~/.config/go/telemetry"})
	if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != "off" || got[1] != "mode" {
		t.Errorf("go env GOTELEMETRY, then the telemetry directory: %q; want off, and only the mode file", res.Stdout)
	}
}

func TestFilesAndBinariesPersist(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "cmd/hello/main.go", Data: []byte(helloMain)}}, Command: "go build -o bin/hello ./cmd/hello/main.go"})
	res := mustOK(t, s, goruntime.Request{Command: "./bin/hello && cat cmd/hello/main.go | head -1"})
	if !strings.Contains(res.Stdout, "hello, world") || !strings.Contains(res.Stdout, "package main") {
		t.Errorf("second execute: %q", res.Stdout)
	}
	data, err := s.ReadFile(context.Background(), "cmd/hello/main.go")
	if err != nil || string(data) != helloMain {
		t.Errorf("ReadFile: %q, %v", data, err)
	}
	entries, err := s.List(context.Background(), "bin")
	if err != nil || len(entries) != 1 || entries[0].Name != "hello" || entries[0].Size == 0 {
		t.Errorf("List bin: %+v, %v", entries, err)
	}
}

func TestResetKeepsBuildCache(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go build -o hello main.go && echo keep > $HOME/keep"})
	count := "find $(go env GOCACHE) -type f | wc -l"
	before := strings.TrimSpace(mustOK(t, s, goruntime.Request{Command: count}).Stdout)
	if err := s.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ls := mustOK(t, s, goruntime.Request{Command: "ls -A"}).Stdout; strings.TrimSpace(ls) != "" {
		t.Errorf("/app after Reset: %q", ls)
	}
	after := strings.TrimSpace(mustOK(t, s, goruntime.Request{Command: count}).Stdout)
	if before != after {
		t.Errorf("build cache files: %s before Reset, %s after", before, after)
	}
	mustOK(t, s, goruntime.Request{Command: "cat $HOME/keep"})
	// Rebuilding the same program hits the cache: the go command runs no compiler.
	res := mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go build -x -o hello main.go 2>&1"})
	if strings.Contains(res.Stdout, "/compile ") {
		t.Errorf("rebuild after Reset compiled again:\n%.2000s", res.Stdout)
	}
}

func TestSeedCacheReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as a non-root user the seed is copied, not linked")
	}
	b := newBackend(t, testOptions())
	s := openSession(t, b)
	// A file of the seed, linked into this sandbox's GOCACHE.
	res := mustOK(t, s, goruntime.Request{Command: "find $(go env GOCACHE) -type f -name '*-d' -links +1 | head -1"})
	f := strings.TrimSpace(res.Stdout)
	if f == "" {
		t.Fatal("no seed file linked into the sandbox's GOCACHE")
	}
	before := mustOK(t, s, goruntime.Request{Command: "sha256sum " + f}).Stdout
	for _, cmd := range []string{"echo x >> " + f, "chmod u+w " + f, "truncate -s 0 " + f, "touch -d 2000-01-01 " + f} {
		if res := run(t, s, goruntime.Request{Command: cmd}); res.ExitCode == 0 {
			t.Errorf("%q succeeded on a seed file", cmd)
		}
	}
	// Replacing the sandbox's own link is allowed and leaves the seed alone.
	mustOK(t, s, goruntime.Request{Command: "rm -f " + f + " && echo mine > " + f})
	other := openSession(t, b)
	if after := mustOK(t, other, goruntime.Request{Command: "sha256sum " + f}).Stdout; after != before {
		t.Errorf("seed file changed for another sandbox: %s -> %s", before, after)
	}
}

func TestModulesOffline(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	// github.com/google/uuid v1.6.0 is a dependency of this module, so it is
	// in the host's module cache wherever these tests build.
	mod := "module m\n\ngo 1.24\n\nrequire github.com/google/uuid v1.6.0\n"
	prog := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/google/uuid\"\n)\n\nfunc main() { fmt.Println(uuid.NewSHA1(uuid.NameSpaceDNS, []byte(\"x\"))) }\n"
	res := mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "go.mod", Data: []byte(mod)}, {Path: "main.go", Data: []byte(prog)}}, Command: "go run ."})
	if !strings.Contains(res.Stdout, "-5") {
		t.Errorf("uuid program printed %q", res.Stdout)
	}
	missing := "module m\n\ngo 1.24\n\nrequire example.com/not/cached v1.2.3\n"
	prog2 := "package main\n\nimport _ \"example.com/not/cached\"\n\nfunc main() {}\n"
	res = run(t, s, goruntime.Request{Files: []goruntime.File{{Path: "go.mod", Data: []byte(missing)}, {Path: "main.go", Data: []byte(prog2)}}, Command: "go run ."})
	if res.Outcome != goruntime.OutcomeBuildFailed || !strings.Contains(res.Stderr, "example.com/not/cached") || !strings.Contains(res.Stderr, "no network") {
		t.Errorf("missing module: outcome %s, stderr:\n%s", res.Outcome, res.Stderr)
	}
}

func TestDiesWithParent(t *testing.T) {
	b := newBackend(t, testOptions())
	id := helper(t, "open-exit")
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := b.Attach(context.Background(), id)
		if errors.Is(err, goruntime.ErrSandboxNotFound) {
			break
		}
		if err == nil && time.Now().After(deadline) {
			t.Fatalf("sandbox %s still runs after its opener exited", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Clean what the dead sandbox left on disk.
	os.RemoveAll(filepath.Join(b.StateDir(), "sandboxes", id))
}

func TestDisconnectThenAttachFromAnotherProcess(t *testing.T) {
	b := newBackend(t, testOptions())
	id := helper(t, "disconnect")
	s, err := goruntime.Attach(context.Background(), b, id, goruntime.Options{})
	if err != nil {
		t.Fatalf("attach %s: %v", id, err)
	}
	res := mustOK(t, s, goruntime.Request{Command: "cat left.txt"})
	if res.Stdout != "left behind" {
		t.Errorf("left.txt: %q", res.Stdout)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Attach(context.Background(), id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("attach after close: %v, want ErrSandboxNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id)); !os.IsNotExist(err) {
		t.Errorf("state directory left after Close: %v", err)
	}
}

func TestAttachBadIDs(t *testing.T) {
	b := newBackend(t, testOptions())
	for _, id := range []string{"", "../../etc", "0123456789abcdef", "zzzz", "0123456789ABCDEF"} {
		if _, err := b.Attach(context.Background(), id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
			t.Errorf("Attach(%q): %v, want ErrSandboxNotFound", id, err)
		}
	}
}

func TestBadFileRequests(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	sb := s.Sandbox()
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "a/b", bytes.NewReader(nil)); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("WriteFile a/b: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "../../etc/passwd"); !errors.Is(err, goruntime.ErrPathEscape) && !errors.Is(err, goruntime.ErrNotExist) {
		t.Errorf("ReadFile ../../etc/passwd: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "missing.txt"); !errors.Is(err, goruntime.ErrNotExist) {
		t.Errorf("ReadFile missing: %v", err)
	}
	if _, err := sb.List(ctx, "missing"); !errors.Is(err, goruntime.ErrNotExist) {
		t.Errorf("List missing: %v", err)
	}
	mustOK(t, s, goruntime.Request{Command: "true"})
}

func TestClosedSandbox(t *testing.T) {
	b := newBackend(t, testOptions())
	sb, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(context.Background(), goruntime.ExecRequest{Command: "true"}); !errors.Is(err, goruntime.ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestUnavailableNamesTheFix(t *testing.T) {
	opts := testOptions()
	opts.BwrapPath = "/nonexistent/bwrap"
	_, err := local.New(opts)
	if !errors.Is(err, goruntime.ErrUnavailable) || !strings.Contains(err.Error(), "scripts/install-deps.sh") {
		t.Errorf("New without bwrap: %v", err)
	}
}

// TestServerWithoutProcessAPICompanion: a sandbox-server binary without
// sandbox-processapi next to it is refused by New, naming the companion
// (its sandboxes would have no streaming commands).
func TestServerWithoutProcessAPICompanion(t *testing.T) {
	opts := testOptions()
	opts.ServerPath = filepath.Join(t.TempDir(), "sandbox-server")
	b, err := os.ReadFile(serverPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opts.ServerPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = local.New(opts)
	if err == nil || !strings.Contains(err.Error(), "sandbox-processapi") {
		t.Fatalf("New with a server alone: %v, want an error naming sandbox-processapi", err)
	}
}

// clipTail is the last 400 bytes of s, for messages.
func clipTail(s string) string { return s[max(0, len(s)-400):] }
