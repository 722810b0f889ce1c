package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The tests in this file try to make one sandbox take a host-wide
// resource from the host and from every other sandbox (the inventory in
// docs/local-backend.md, "What one sandbox can take from the host"), and
// check that the host keeps the share the backend promises while a
// second sandbox still runs `go run`.

// fileHog starts up to 60 child processes (itself, re-executed) that each
// open /dev/null until an open fails (at most 5000 times), prints
// "child <opened> <error>" for each, touches /app/ready and holds the
// files until /app/release exists.
const fileHog = `package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"time"
)

func waitFor(name string) {
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat(name); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func main() {
	if len(os.Args) > 1 {
		var held []*os.File
		var failure error
		for len(held) < 5000 {
			f, err := os.Open("/dev/null")
			if err != nil {
				failure = err
				break
			}
			held = append(held, f)
		}
		fmt.Println(len(held), failure)
		waitFor("/app/release")
		return
	}
	var kids []*exec.Cmd
	for i := 0; i < 60; i++ {
		c := exec.Command("/proc/self/exe", "child")
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			break
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			fmt.Println("child died:", err)
			break
		}
		fmt.Print("child ", line)
		kids = append(kids, c)
	}
	os.WriteFile("/app/ready", nil, 0o644)
	waitFor("/app/release")
	for _, c := range kids {
		c.Wait()
	}
}
`

// fileTableUse returns the host's allocated file handles and the table's
// size (fs.file-max), from /proc/sys/fs/file-nr.
func fileTableUse(t *testing.T) (used, max int64) {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/fs/file-nr")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) != 3 {
		t.Fatalf("file-nr: %q", data)
	}
	used, _ = strconv.ParseInt(f[0], 10, 64)
	max, _ = strconv.ParseInt(f[2], 10, 64)
	return used, max
}

// hostile runs command in s in the background until the test releases it
// (or ends): it waits for /app/ready, then returns a release function that
// creates /app/release and waits for the command's result.
func hostile(t *testing.T, s *goruntime.Session, req goruntime.Request) (release func() *goruntime.Result) {
	t.Helper()
	app := filepath.Join(s.Sandbox().(*local.Sandbox).Dir(), "app")
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
			if werr := os.WriteFile(filepath.Join(app, "release"), nil, 0o644); werr != nil {
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
		if _, err := os.Stat(filepath.Join(app, "ready")); err == nil {
			return release
		}
		select {
		case <-done:
			t.Fatalf("hostile command ended before it was ready: %v\nstdout: %s\nstderr: %s", err, res.Stdout, res.Stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestOpenFileTableShare: a sandbox whose processes open files until they
// cannot holds at most 1/16 of the host's open-file table (each process
// stops at Options.OpenFiles with EMFILE), while a second sandbox runs
// `go run`. Before RLIMIT_NOFILE was set, sandboxes inherited the host's
// limit (20000 on these machines) and 130 processes filled the table.
func TestOpenFileTableShare(t *testing.T) {
	b := newBackend(t, testOptions())
	hog, other := openSession(t, b), openSession(t, b)
	before, fileMax := fileTableUse(t)
	release := hostile(t, hog, goruntime.Request{
		Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(fileHog)}},
		Command: "cd hog && go build -o /tmp/hog main.go && /tmp/hog",
		Timeout: 3 * time.Minute,
	})
	held, _ := fileTableUse(t)
	res := mustOK(t, other, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go"})
	if !strings.Contains(res.Stdout, "hello, world") {
		t.Errorf("second sandbox's go run: %q", res.Stdout)
	}
	out := release().Stdout

	children := 0
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(line, "child ")
		if !ok {
			continue
		}
		children++
		n, failure, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if opened, _ := strconv.Atoi(n); opened >= 5000 || !strings.Contains(failure, "too many open files") {
			t.Fatalf("a process in the sandbox opened %s files and then %q; want EMFILE (\"too many open files\") below the open-file limit", n, failure)
		}
	}
	if children < 10 {
		t.Fatalf("only %d child processes started; output:\n%s", children, out)
	}
	// Each process holds at most its limit; the host's table grew by no
	// more (the sandbox's other processes, a few dozen files, aside).
	// noise allows for what other processes on the host opened meanwhile.
	const noise = 20_000
	bound := int64(children+4)*int64(defaultOpenFiles(fileMax)) + noise
	t.Logf("host open files: %d before, %d while %d processes of the sandbox held theirs (table %d, bound %d)", before, held, children, fileMax, bound)
	if held-before > bound {
		t.Errorf("one sandbox's %d processes took %d of the host's open files: more than %d (each its limit, and %d for the rest of the host)", children, held-before, bound, noise)
	}
}

// defaultOpenFiles is local.Options.OpenFiles's default on a host whose
// table holds fileMax files, for the default task limit.
func defaultOpenFiles(fileMax int64) int {
	n := fileMax / 16 / int64(local.DefaultProcesses+local.OwnTasks)
	return int(max(local.MinOpenFiles, min(local.DefaultOpenFiles, n)))
}

// TestOpenFilesOption: Options.OpenFiles is each sandbox process's
// RLIMIT_NOFILE, soft and hard, so a command cannot raise it; New
// refuses one below MinOpenFiles.
func TestOpenFilesOption(t *testing.T) {
	opts := testOptions()
	opts.OpenFiles = 300
	s := openSession(t, newBackend(t, opts))
	res := mustOK(t, s, goruntime.Request{Command: "ulimit -Sn; ulimit -Hn; ulimit -n 301 2>&1 || echo refused"})
	if got := strings.Fields(res.Stdout); len(got) < 3 || got[0] != "300" || got[1] != "300" || got[len(got)-1] != "refused" {
		t.Errorf("ulimit -Sn, -Hn, raising it: %q; want 300, 300, refused", res.Stdout)
	}
	opts.OpenFiles = local.MinOpenFiles - 1
	if _, err := local.New(opts); err == nil || !strings.Contains(err.Error(), "Options.OpenFiles") {
		t.Errorf("New with OpenFiles %d: %v; want an error naming Options.OpenFiles", opts.OpenFiles, err)
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
	// The log is on the sandbox's disk: a full log is the sandbox's own
	// problem, never the host's.
	if real, err := filepath.EvalSymlinks(logPath); err != nil || !strings.Contains(real, string(filepath.Separator)+"disks"+string(filepath.Separator)) {
		t.Errorf("server.log is at %s (%v); want it on the sandbox's disk (under the state directory's disks/)", real, err)
	}
}

// ptyHog opens /dev/ptmx until it fails (at most 4000 times), prints
// "ptys <opened> <error>", touches /app/ready and holds them until
// /app/release exists.
const ptyHog = `package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	var held []*os.File
	var failure error
	for len(held) < 4000 {
		f, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
		if err != nil {
			failure = err
			break
		}
		held = append(held, f)
	}
	fmt.Println("ptys", len(held), failure)
	os.WriteFile("/app/ready", nil, 0o644)
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat("/app/release"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
`

// TestPtyShare: a sandbox opening pseudo-terminals until it cannot stops
// at its own cap, and a second sandbox still gets one. Before, one
// sandbox took all 3071 the host's pool had for sandboxes, and another's
// open("/dev/ptmx") failed with ENOSPC.
func TestPtyShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pty cap needs root (docs/local-backend.md, the inventory)")
	}
	b := newBackend(t, testOptions())
	hog, other := openSession(t, b), openSession(t, b)
	release := hostile(t, hog, goruntime.Request{
		Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(ptyHog)}},
		Command: "cd hog && go run main.go",
		Timeout: 3 * time.Minute,
	})
	res := mustOK(t, other, goruntime.Request{
		Files:   []goruntime.File{{Path: "one/main.go", Data: []byte(strings.Replace(ptyHog, "len(held) < 4000", "len(held) < 1", 1))}},
		Command: "cd one && touch /app/release && go run main.go",
	})
	if !strings.Contains(res.Stdout, "ptys 1 <nil>") {
		t.Errorf("the second sandbox could not open a pty while the first held all it could: %q", res.Stdout)
	}
	out := release().Stdout
	var opened int
	var failure string
	if _, err := fmt.Sscanf(out, "ptys %d %s", &opened, &failure); err != nil {
		t.Fatalf("pty hog's output %q: %v", out, err)
	}
	if opened == 0 || opened > 64 || !strings.Contains(out, "no space left on device") {
		t.Errorf("the sandbox opened %d ptys, then %q; want its cap (a few dozen), then ENOSPC", opened, strings.TrimSpace(out))
	}
	t.Logf("one sandbox: %d ptys, then %s", opened, failure)
}

// TestDiskRefusedWhenHostIsFull: a sandbox whose disk quota is more than
// the host has free is refused with an error naming the free space and
// the settings, and nothing is left behind; before, its sparse image was
// made and mounted, and filling it would have filled the host.
func TestDiskRefusedWhenHostIsFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the disk quota needs root")
	}
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
		!strings.Contains(err.Error(), "--disk-mb") {
		t.Fatalf("Open with a disk quota of %d MiB: %v; want ErrUnavailable naming the free space and --disk-mb", opts.DiskBytes>>20, err)
	}
	if entries, _ := filepath.Glob(filepath.Join(state, "disks", "*.img")); len(entries) > 0 {
		for _, e := range entries {
			if fi, err := os.Stat(e); err == nil && fi.Size() == opts.DiskBytes {
				t.Errorf("a disk image of the refused size was left behind: %s", e)
			}
		}
	}
}

// inotifyHog makes inotify instances until it cannot (at most 10000),
// prints "inotify <made> <error>", touches /app/ready and holds them until
// /app/release exists.
const inotifyHog = `package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	made := 0
	var failure error
	for made < 10000 {
		if _, err := syscall.InotifyInit1(0); err != nil {
			failure = err
			break
		}
		made++
	}
	fmt.Println("inotify", made, failure)
	os.WriteFile("/app/ready", nil, 0o644)
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat("/app/release"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
`

// TestInotifyShare: the kernel counts inotify instances per user, and
// every sandbox is a host uid of its own: one sandbox that makes all it
// may (fs.inotify.max_user_instances) leaves the next one its own.
func TestInotifyShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes get host uids of their own only as root")
	}
	b := newBackend(t, testOptions())
	hog, other := openSession(t, b), openSession(t, b)
	release := hostile(t, hog, goruntime.Request{
		Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(inotifyHog)}},
		Command: "cd hog && go run main.go",
		Timeout: 3 * time.Minute,
	})
	res := mustOK(t, other, goruntime.Request{
		Files:   []goruntime.File{{Path: "one/main.go", Data: []byte(strings.Replace(inotifyHog, "made < 10000", "made < 1", 1))}},
		Command: "cd one && touch /app/release && go run main.go",
	})
	if !strings.Contains(res.Stdout, "inotify 1 <nil>") {
		t.Errorf("the second sandbox could not make an inotify instance while the first held all it could: %q", res.Stdout)
	}
	out := strings.TrimSpace(release().Stdout)
	if strings.HasPrefix(out, "inotify 10000 ") || !strings.Contains(out, "too many open files") {
		t.Errorf("inotify hog: %q; want EMFILE at the per-user limit", out)
	}
	t.Logf("one sandbox: %s", out)
}

// mapHog starts up to 12 child processes (itself, re-executed) that each
// open a file, map a page of it and close the descriptor until that fails
// (the kernel's map count per process, or the memory limit): each mapping
// keeps an open file that RLIMIT_NOFILE does not count.
const mapHog = `package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		n := 0
		var failure error
		for n < 70000 {
			fd, err := syscall.Open("/tmp/page", syscall.O_RDONLY, 0)
			if err != nil {
				failure = err
				break
			}
			_, _, e := syscall.Syscall6(syscall.SYS_MMAP, 0, 4096, syscall.PROT_READ, syscall.MAP_PRIVATE, uintptr(fd), 0)
			syscall.Close(fd)
			if e != 0 {
				failure = e
				break
			}
			n++
		}
		fmt.Println(n, failure)
		bufio.NewReader(os.Stdin).ReadString('\n')
		return
	}
	os.WriteFile("/tmp/page", make([]byte, 4096), 0o644)
	var kids []*exec.Cmd
	var stdins []interface{ Close() error }
	for i := 0; i < 12; i++ {
		c := exec.Command("/proc/self/exe", "child")
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		out, _ := c.StdoutPipe()
		in, _ := c.StdinPipe()
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			break
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			fmt.Println("child died:", err)
			break
		}
		fmt.Print("child ", line)
		kids = append(kids, c)
		stdins = append(stdins, in)
	}
	for _, in := range stdins {
		in.Close()
	}
	for _, c := range kids {
		c.Wait()
	}
}
`

// TestMappedFilesShare: files a sandbox holds through memory mappings
// (open, mmap, close), which RLIMIT_NOFILE does not count, are bounded by
// its memory limit at no more than MemoryBytes / 384 bytes: the figure
// behind the file-table protection (fileTableProblem), which requires the
// host's table to hold four such sandboxes. A kernel that made such files
// cheaper would fail this test, and the protection would need a new
// figure.
func TestMappedFilesShare(t *testing.T) {
	const memory, perFile = 128 << 20, 384 // local.mappedFileBytes
	opts := testOptions()
	opts.MemoryBytes = memory
	s := openSession(t, newBackend(t, opts))
	before, _ := fileTableUse(t)
	peak := before
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if used, _ := fileTableUse(t); used > peak {
				peak = used
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	res := run(t, s, goruntime.Request{
		Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(mapHog)}},
		Command: "cd hog && go build -o /tmp/hog main.go && /tmp/hog",
		Timeout: 3 * time.Minute,
	})
	close(stop)
	<-sampled
	held := int64(0)
	for line := range strings.Lines(res.Stdout) {
		if rest, ok := strings.CutPrefix(line, "child "); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			held += n
		}
	}
	t.Logf("the sandbox's processes mapped %d files in all (outcome %s); the host's table peaked %d above where it was (bound %d)", held, res.Outcome, peak-before, memory/perFile)
	if held < memory/perFile {
		t.Fatalf("the hog mapped only %d files; it proves nothing:\n%s\n%s", held, res.Stdout, res.Stderr)
	}
	if peak-before > memory/perFile {
		t.Errorf("a sandbox with %d MiB of memory held %d files at once: more than %d (memory / %d bytes); lower local.mappedFileBytes",
			memory>>20, peak-before, memory/perFile, perFile)
	}
}
