package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// seedlessOpenBound bounds an Open while the seed build cache cannot
// complete. It is no measure of speed: a start has its own bound
// (Options.StartTimeout, 1 min) and the rest is margin for a busy machine;
// an Open that waited for the seed would wait for the test's lock, past
// any bound.
const seedlessOpenBound = 10 * time.Minute

// jsonMain is a second program, needing packages hello world does not.
const jsonMain = "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\t\"strings\"\n)\n\n" +
	"func main() {\n\tb, _ := json.Marshal(map[string]string{\"k\": strings.ToUpper(\"v\")})\n\tfmt.Println(string(b))\n}\n"

// holdSeedLock takes the lock of b's base seed build, as another process
// building the seed would hold it: b's build waits for it, so the seed
// cannot complete until the returned release is called (or the test
// ends).
func holdSeedLock(t *testing.T, b *local.Backend) (release func()) {
	t.Helper()
	f, err := lockSeed(b)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { f.Close() }) }
	t.Cleanup(release)
	return release
}

// lockSeed takes the lock of b's base seed build; closing the file
// releases it.
func lockSeed(b *local.Backend) (*os.File, error) {
	p, err := local.SeedLockPath(b)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("hold the seed build's lock %s: %w", p, err)
	}
	return f, nil
}

// seedComplete reports whether a base seed of state is complete.
func seedComplete(t *testing.T, state string) bool {
	t.Helper()
	return seedIn(state)
}

func seedIn(state string) bool {
	done, _ := filepath.Glob(filepath.Join(state, "seed", "*", ".complete"))
	return len(done) > 0
}

// compiles reports whether the output of go build -x compiled package p.
func compiles(out, p string) bool { return strings.Contains(out, " -p "+p+" ") }

// TestOpenWithoutSeed: no Open waits for the seed build cache. On an
// empty state directory whose seed cannot complete (the test holds the
// seed build's lock, as another process building it would), Open and a
// `go run` of hello world return its output, and a second program that
// needs other packages runs too, all before the seed is complete; the
// sandbox compiled fmt itself and keeps it in its own cache, and Open's
// progress said once that the call compiles what it needs meanwhile; a
// sandbox without a disk of its own (Relax.DiskQuota) runs it too.
// The warm pool starts nothing meanwhile. Once the seed is complete the
// pool fills, and a new sandbox starts with the seed: its first build of
// hello world compiles main and not fmt.
func TestOpenWithoutSeed(t *testing.T) {
	opts := testOptions()
	opts.StateDir = localtest.StateDir(t)
	opts.WarmPool = 1
	b, err := local.New(opts)
	if err != nil {
		t.Fatalf("local backend unavailable (run scripts/install-deps.sh): %v", err)
	}
	// Registered before the lock's release, so it runs after it: Close
	// ends a seed build still under way.
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	release := holdSeedLock(t, b)

	var mu sync.Mutex
	var reports []goruntime.Progress
	progress := func(p goruntime.Progress) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	}
	start := time.Now()
	octx, cancel := context.WithTimeout(context.Background(), seedlessOpenBound)
	s, err := goruntime.Open(octx, b, goruntime.Options{Progress: progress})
	cancel()
	if err != nil {
		t.Fatalf("open while the seed cannot complete: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	long := 20 * time.Minute // a first build of the standard library on a busy machine (the demo's passed 2 min at load 50 on 2 CPUs)
	res := mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go", Timeout: long})
	if res.Stdout != "hello, world\n" {
		t.Errorf("hello world printed %q", res.Stdout)
	}
	t.Logf("without the seed: Open and the first go run of hello world took %s", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	res = mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(jsonMain)}}, Command: "go run main.go", Timeout: long})
	if res.Stdout != "{\"k\":\"V\"}\n" {
		t.Errorf("the second program printed %q", res.Stdout)
	}
	t.Logf("without the seed: the second program's go run took %s", time.Since(start).Round(100*time.Millisecond))
	if seedComplete(t, opts.StateDir) {
		t.Fatal("the seed completed while the test held its build's lock")
	}
	// What the sandbox compiled stays in its own cache.
	res = mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go build -x -o /tmp/hello main.go 2>&1"})
	if compiles(res.Stdout, "fmt") {
		t.Errorf("the sandbox compiled fmt again; its own cache lost what its first go run compiled:\n%.3000s", res.Stdout)
	}
	mu.Lock()
	said := 0
	for _, p := range reports {
		if strings.Contains(p.String(), "this call compiles what it needs meanwhile") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("Open's progress said %d times that the call compiles what it needs meanwhile, want once: %q", said, reports)
	}
	mu.Unlock()
	if n, starting := b.WarmPoolReady(), local.WarmPoolStarting(b); n+starting != 0 {
		t.Errorf("the warm pool holds %d sandboxes and starts %d before the seed is complete", n, starting)
	}
	// Without a disk of its own the build cache is a directory of the
	// sandbox's, empty where it would hold the seed's links (and, as
	// root, without a host uid of its own: the test's state directory is
	// closed to other uids).
	plainOpts := opts
	plainOpts.WarmPool, plainOpts.Relax.DiskQuota, plainOpts.Relax.HostUID = -1, true, true
	plain, err := local.New(plainOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close(context.Background()) })
	octx, cancel = context.WithTimeout(context.Background(), seedlessOpenBound)
	ps, err := goruntime.Open(octx, plain, goruntime.Options{})
	cancel()
	if err != nil {
		t.Fatalf("open without a disk while the seed cannot complete: %v", err)
	}
	t.Cleanup(func() { ps.Close(context.Background()) })
	res = mustOK(t, ps, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go", Timeout: long})
	if res.Stdout != "hello, world\n" {
		t.Errorf("hello world without a disk printed %q", res.Stdout)
	}
	if seedComplete(t, opts.StateDir) {
		t.Fatal("the seed completed while the test held its build's lock")
	}

	release()
	pctx, cancel := context.WithCancel(t.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	if err := b.Prepare(pctx); err != nil {
		t.Fatalf("prepare the seed after the lock's release: %v", err)
	}
	for b.WarmPoolReady() == 0 {
		if pctx.Err() != nil {
			t.Fatal("the warm pool did not fill once the seed was complete")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The pool's sandbox (started once the seed was complete), or one
	// started now.
	seeded := openSession(t, b)
	res = mustOK(t, seeded, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go build -x -o /tmp/hello main.go 2>&1 && /tmp/hello"})
	if !compiles(res.Stdout, "main") || compiles(res.Stdout, "fmt") {
		t.Errorf("a sandbox opened once the seed was complete: its first build should compile main and not fmt:\n%.3000s", res.Stdout)
	}
	if !strings.HasSuffix(res.Stdout, "hello, world\n") {
		t.Errorf("hello world built with the seed printed %q", res.Stdout)
	}
}

// seedlessUID is the user TestOpenWithoutSeedRootless runs its backend
// as: a uid with no account on the host and no other use in the tests.
const seedlessUID = 65529

// TestOpenWithoutSeedRootless: as a user other than root (a memory disk,
// whose build cache overlay then has the empty directory below it, read
// by the sandbox's subordinate ids), on an empty state directory whose
// seed cannot complete (the helper holds the seed build's lock), Open
// and a go run of hello world return its output.
func TestOpenWithoutSeedRootless(t *testing.T) {
	u := newAsUser(t, seedlessUID, "grs-seedless", rootlessSubIDs+3*65536, false)
	out, err := u.command("seedless", true).CombinedOutput()
	t.Logf("the backend as uid %d without a seed:\n%s", seedlessUID, out)
	if err != nil {
		t.Fatalf("seedless helper: %v", err)
	}
	for _, want := range []string{"exit 0\n", "stdout \"hello, world\\n\"\n", "seed complete false\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the helper did not print %q", want)
		}
	}
	if strings.Contains(string(out), "disk memory\n") && !strings.Contains(string(out), "gocache overlayfs\n") {
		t.Errorf("a memory disk's build cache is not an overlay")
	}
}

// seedlessHelper is the helper mode "seedless": as the user, on its empty
// state directory, hold the seed build's lock, open a sandbox and go run
// hello world in it. It prints the command's exit code and output, what
// the sandbox's GOCACHE is (its file system type), whether the disk is a
// memory disk, and whether a seed was complete by then.
func seedlessHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close(context.Background())
	lock, err := lockSeed(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer lock.Close()
	octx, cancel := context.WithTimeout(ctx, seedlessOpenBound)
	s, err := goruntime.Open(octx, b, goruntime.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close(context.Background())
	res, err := s.Execute(ctx, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go", Timeout: 5 * time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "execute:", err)
		return 1
	}
	fmt.Printf("exit %d\nstdout %q\nstderr %q\n", res.ExitCode, res.Stdout, res.Stderr)
	if !opts.Relax.DiskQuota {
		fmt.Println("disk memory")
	}
	if fs, err := s.Execute(ctx, goruntime.Request{Command: "stat -f -c %T \"$(go env GOCACHE)\""}); err == nil {
		fmt.Printf("gocache %s\n", strings.TrimSpace(fs.Stdout))
	}
	fmt.Printf("seed complete %v\n", seedIn(opts.StateDir))
	return 0
}
