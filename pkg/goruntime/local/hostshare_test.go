package local_test

import (
	"context"
	"errors"
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

// The tests in this file try to make one sandbox take a host-wide
// resource from the host and from every other sandbox (the inventory in
// docs/local-backend.md, "What one sandbox can take from the host"), and
// check that the host keeps the share the backend promises while a
// second sandbox still runs `go run`.

// hostile runs command in s in the background until the test releases it
// (or ends): it waits for /app/ready, then returns a release function that
// creates /app/release and waits for the command's result. Both go through
// the sandbox's runtime server, as a client's calls would: the host path
// of /app is closed to a backend whose sandboxes run as uids of their own.
func hostile(t *testing.T, s *goruntime.Session, req goruntime.Request) (release func() *goruntime.Result) {
	t.Helper()
	sb := s.Sandbox()
	var (
		res  *goruntime.Result
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		res, err = s.Execute(context.Background(), req)
	}()
	var once sync.Once
	release = func() *goruntime.Result {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if werr := sb.WriteFile(ctx, "release", strings.NewReader("")); werr != nil {
				t.Errorf("release the hostile command: %v", werr)
			}
			<-done
		})
		if err != nil {
			t.Fatalf("hostile command: %v", err)
		}
		return res
	}
	t.Cleanup(func() { release() })
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, rerr := sb.ReadFile(ctx, "ready")
		cancel()
		switch {
		case rerr == nil:
			return release
		case !errors.Is(rerr, goruntime.ErrNotExist):
			t.Fatalf("wait for the hostile command to be ready: %v", rerr)
		}
		select {
		case <-done:
			t.Fatalf("hostile command ended before it was ready: %v\nstdout: %s\nstderr: %s", err, res.Stdout, res.Stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logFlood asks the sandbox's own runtime server, over its socket, for
// a missing file with a long name 40000 times from 4 connections: each
// request is a line in the server's log.
const logFlood = `package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

func main() {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", "/run/sandbox/server.sock")
	}}}
	url := "http://sandbox/download/" + strings.Repeat("A", 3000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				resp, err := c.Get(url)
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	fmt.Println("failed", failed)
}
`

// TestServerLogFloodBounded: a command flooding its own server with
// requests cannot grow the server's log on the host past the server's
// cap (--log-max-bytes, 8 MiB), and the log is on the sandbox's disk, so
// even a server a command took over stays within the disk quota. Before,
// the log grew by ~6 MiB/s outside the quota.
func TestServerLogFloodBounded(t *testing.T) {
	localtest.RequireDiskImage(t) // the bound is the log's place on the sandbox's disk
	b := newBackend(t, testOptions())
	s := openSession(t, b)
	res := mustOK(t, s, goruntime.Request{
		Files:   []goruntime.File{{Path: "flood/main.go", Data: []byte(logFlood)}},
		Command: "cd flood && go run main.go",
		Timeout: 3 * time.Minute,
	})
	if !strings.Contains(res.Stdout, "failed 0") {
		t.Fatalf("flood: %q", res.Stdout)
	}
	logPath := filepath.Join(s.Sandbox().(*local.Sandbox).Dir(), "log", "server.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	const capBytes, line = 8 << 20, 4 << 10
	t.Logf("server.log after 40000 requests: %d bytes", fi.Size())
	if fi.Size() > capBytes+line {
		t.Errorf("server.log grew to %d bytes; the cap is %d", fi.Size(), capBytes)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "log emptied") {
		t.Errorf("the flood (%d bytes of log) never reached the cap: the test proves nothing", fi.Size())
	}
	// The log is on the sandbox's disk, the file system of its /app: a
	// full log is the sandbox's own problem, never the host's.
	dev := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Dev
	}
	sandboxDir := s.Sandbox().(*local.Sandbox).Dir()
	if d := dev(logPath); d != dev(filepath.Join(sandboxDir, "app")) || d == dev(sandboxDir) {
		t.Errorf("server.log is on device %#x, /app on %#x, the state directory on %#x: want the log on the sandbox's disk", d, dev(filepath.Join(sandboxDir, "app")), dev(sandboxDir))
	}
}

// TestDiskRefusedWhenHostIsFull: a sandbox whose disk quota is more than
// the host has free is refused with an error naming the free space and
// the settings, and nothing is left behind; before, its sparse image was
// made and mounted, and filling it would have filled the host.
func TestDiskRefusedWhenHostIsFull(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	state := opts.StateDir
	if state == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		state = filepath.Join(cache, "go-runtime-sandbox")
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(state, &st); err != nil {
		t.Fatal(err)
	}
	// A quota of 1 GiB more than the host has free: an image this size
	// can be made (it is sparse), but never filled.
	opts.DiskBytes = int64(st.Bavail)*st.Bsize + 1<<30
	b := newBackend(t, opts)
	_, err := goruntime.Open(context.Background(), b, goruntime.Options{})
	if err == nil || !errors.Is(err, goruntime.ErrUnavailable) || !strings.Contains(err.Error(), "MiB free, less than one sandbox's disk quota") ||
		!strings.Contains(err.Error(), "Options.DiskBytes") {
		t.Fatalf("Open with a disk quota of %d MiB: %v; want ErrUnavailable naming the free space and Options.DiskBytes", opts.DiskBytes>>20, err)
	}
	if entries, _ := filepath.Glob(filepath.Join(state, "disks", "*.img")); len(entries) > 0 {
		for _, e := range entries {
			if fi, err := os.Stat(e); err == nil && fi.Size() == opts.DiskBytes {
				t.Errorf("a disk image of the refused size was left behind: %s", e)
			}
		}
	}
}

// takerProgram is a program that takes one of some host resource with
// take (the body of a func() (any, error)) up to most times or until that
// fails, prints "taken <n> <error>", touches /app/ready and holds what it
// took until /app/release exists.
func takerProgram(take string, most int) string {
	return fmt.Sprintf(`package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

var _ = syscall.Getpid

func take() (any, error) { %s }

func main() {
	var held []any
	var failure error
	for len(held) < %d {
		x, err := take()
		if err != nil {
			failure = err
			break
		}
		held = append(held, x)
	}
	fmt.Println("taken", len(held), failure)
	os.WriteFile("/app/ready", nil, 0o644)
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat("/app/release"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
`, take, most)
}

// takeBoth runs takerProgram(take, most) in one sandbox and, while that
// holds all it took, takerProgram(take, 1) in a second sandbox: the test
// fails unless the second got its one. It returns what the first printed
// after "taken ".
func takeBoth(t *testing.T, take string, most int) string {
	t.Helper()
	b := newBackend(t, testOptions())
	hog, other := openSession(t, b), openSession(t, b)
	release := hostile(t, hog, goruntime.Request{
		Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(takerProgram(take, most))}},
		Command: "cd hog && go run main.go",
		Timeout: 3 * time.Minute,
	})
	res := mustOK(t, other, goruntime.Request{
		Files:   []goruntime.File{{Path: "one/main.go", Data: []byte(takerProgram(take, 1))}},
		Command: "cd one && touch /app/release && go run main.go",
	})
	if !strings.Contains(res.Stdout, "taken 1 <nil>") {
		t.Errorf("a second sandbox could not take one (%s) while the first held all it could: %q", take, res.Stdout)
	}
	out := strings.TrimSpace(release().Stdout)
	rest, ok := strings.CutPrefix(out, "taken ")
	if !ok {
		t.Fatalf("the first sandbox printed %q", out)
	}
	return rest
}

// TestPtyShare: a sandbox opening pseudo-terminals until it cannot stops
// at its own cap, and a second sandbox still gets one. Before, one
// sandbox took all 3071 the host's pool had for sandboxes, and another's
// open("/dev/ptmx") failed with ENOSPC.
func TestPtyShare(t *testing.T) {
	got := takeBoth(t, `return os.OpenFile("/dev/ptmx", os.O_RDWR, 0)`, 4000)
	var opened int
	fmt.Sscan(got, &opened)
	if opened == 0 || opened > 64 || !strings.Contains(got, "no space left on device") {
		t.Errorf("the sandbox opened ptys and then: %q; want its cap (a few dozen), then ENOSPC", got)
	}
	t.Logf("one sandbox: %s", got)
}

// TestInotifyShare: the kernel counts inotify instances per user, and
// every sandbox is a host uid of its own: one sandbox that makes all it
// may (fs.inotify.max_user_instances) leaves the next one its own.
func TestInotifyShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes get host uids of their own only as root")
	}
	got := takeBoth(t, `return syscall.InotifyInit1(0)`, 10000)
	if strings.HasPrefix(got, "10000 ") || !strings.Contains(got, "too many open files") {
		t.Errorf("inotify instances: %q; want EMFILE at the per-user limit", got)
	}
	t.Logf("one sandbox: %s", got)
}
