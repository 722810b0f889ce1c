package local_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The host's open-file table: files a sandbox holds through descriptors
// (capped per process by RLIMIT_NOFILE) and through memory mappings
// (bounded by its memory limit). See hostshare_test.go.

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
			fmt.Println("child died:", err, c.Wait())
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

// TestOpenFileTableShare: a sandbox whose processes open files until they
// cannot takes from the host's open-file table no more than its limit
// per process (each stops at Options.OpenFiles with EMFILE), while a second sandbox runs
// `go run`. Before RLIMIT_NOFILE was set, sandboxes inherited the host's
// limit (20000 on these machines) and 130 processes filled the table.
func TestOpenFileTableShare(t *testing.T) {
	b := newBackend(t, testOptions())
	hog, other := openSession(t, b), openSession(t, b)
	limit, err := strconv.ParseInt(strings.TrimSpace(mustOK(t, hog, goruntime.Request{Command: "ulimit -Hn"}).Stdout), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
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
	bound := int64(children+4)*limit + noise
	t.Logf("host open files: %d before, %d while %d processes of the sandbox held theirs (table %d, bound %d)", before, held, children, fileMax, bound)
	if held-before > bound {
		t.Errorf("one sandbox's %d processes took %d of the host's open files: more than %d (each its limit, and %d for the rest of the host)", children, held-before, bound, noise)
	}
}

// openFilesAttack: each process's open-file limit (RLIMIT_NOFILE) is
// limit, soft and hard, so a command cannot raise it.
func openFilesAttack(s *goruntime.Session, limit int) findings {
	var f findings
	res := f.mustOK(s, goruntime.Request{Command: fmt.Sprintf("ulimit -Sn; ulimit -Hn; ulimit -n %d 2>&1 || echo refused", limit+1)})
	if res == nil {
		return f
	}
	if got := strings.Fields(res.Stdout); len(got) < 3 || got[0] != strconv.Itoa(limit) || got[1] != strconv.Itoa(limit) || got[len(got)-1] != "refused" {
		f.add("ulimit -Sn, -Hn, raising it: %q; want %d, %d, refused", res.Stdout, limit, limit)
	}
	return f
}

// TestOpenFilesOption: Options.OpenFiles is each sandbox process's
// RLIMIT_NOFILE (openFilesAttack); New refuses one below MinOpenFiles.
func TestOpenFilesOption(t *testing.T) {
	opts := testOptions()
	opts.OpenFiles = 300
	check(t, openFilesAttack(openSession(t, newBackend(t, opts)), 300))
	opts.OpenFiles = local.MinOpenFiles - 1
	if _, err := local.New(opts); err == nil || !strings.Contains(err.Error(), "Options.OpenFiles") {
		t.Errorf("New with OpenFiles %d: %v; want an error naming Options.OpenFiles", opts.OpenFiles, err)
	}
}

// mapHog starts up to 12 child processes (itself, re-executed) that each
// open a file, map a page of it and close the descriptor until that fails
// (the kernel's map count per process, or the memory limit): each mapping
// keeps an open file that RLIMIT_NOFILE does not count. A child that dies
// before it reports is named on stdout ("child died: ...") and its stderr
// copied to the hog's.
const mapHog = `package main

import (
	"bufio"
	"bytes"
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
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, _ := c.StdoutPipe()
		in, _ := c.StdinPipe()
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			break
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			fmt.Println("child died:", err, c.Wait())
			fmt.Fprintf(os.Stderr, "the stderr of child %d, which died:\n%s", i+1, stderr.Bytes())
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
// its memory limit at no more than the memory it may be charged
// (local.ChargedMemory: MemoryBytes, with the disk when that is in
// memory) / 384 bytes: the figure
// behind the file-table protection (fileTableProblem), which requires the
// host's table to hold four such sandboxes. A kernel that made such files
// cheaper would fail this test, and the protection would need a new
// figure.
func TestMappedFilesShare(t *testing.T) {
	const memory, perFile = 128 << 20, 384 // local.mappedFileBytes
	opts := smallDisk(testOptions())
	opts.MemoryBytes = memory
	b := newBackend(t, opts)
	bound := local.ChargedMemory(b) / perFile
	s := openSession(t, b)
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
	t.Logf("the sandbox's processes mapped %d files in all (outcome %s); the host's table peaked %d above where it was (bound %d)", held, res.Outcome, peak-before, bound)
	// The hog must have pushed until the sandbox's memory stopped it, or
	// past the bound: a hog that stopped short for another reason (a
	// failed build, a child that would not start) proves nothing. How
	// many files the memory lets it map varies from run to run (the
	// kernel's slab packing, what else the sandbox holds); the bound on
	// the host's table below is what must hold.
	// A child that died before it reported was stopped by the memory
	// limit too, though the outcome names that only when the kill is
	// counted against the command: killed (SIGKILL: the OOM killer), or
	// exited by the Go runtime because the kernel refused it memory (exit
	// status 2, "fatal error: runtime: out of memory" on its stderr).
	died := strings.Contains(res.Stdout, "child died: ")
	killed := strings.Contains(res.Stdout, "child died: EOF signal: killed")
	outOfMemory := died && goOutOfMemory(res.Stderr)
	if held < bound && res.Outcome != goruntime.OutcomeMemoryLimit && !killed && !outOfMemory {
		t.Fatalf("the hog mapped only %d files and was not stopped by the memory limit (outcome %s); it proves nothing\nstdout:\n%s\nstderr (a child's that died, if one did):\n%s", held, res.Outcome, res.Stdout, res.Stderr)
	}
	if peak-before > bound {
		t.Errorf("a sandbox charged at most %d MiB of memory held %d files at once: more than %d (memory / %d bytes); lower local.mappedFileBytes",
			local.ChargedMemory(b)>>20, peak-before, bound, perFile)
	}
}

// goOutOfMemory says whether stderr holds a Go program's death for want of
// memory: the runtime's throw when the kernel refuses it pages ("fatal
// error: runtime: out of memory", "fatal error: out of memory allocating
// heap arena map", "fatal error: runtime: cannot allocate memory"; exit
// status 2).
func goOutOfMemory(stderr string) bool {
	for line := range strings.Lines(stderr) {
		if rest, ok := strings.CutPrefix(line, "fatal error: "); ok &&
			(strings.Contains(rest, "out of memory") || strings.Contains(rest, "cannot allocate memory")) {
			return true
		}
	}
	return false
}

// TestGoOutOfMemoryRecognised: goOutOfMemory knows the Go runtime's death
// for want of memory when it sees it (a program that allocates until its
// address space limit refuses it), and not a program's own failure.
func TestGoOutOfMemoryRecognised(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	prog := "package main\n\nimport \"os\"\n\nvar keep [][]byte\n\n" +
		"func main() {\n\tif len(os.Args) > 1 {\n\t\tpanic(\"asked to\")\n\t}\n" +
		"\tfor {\n\t\tkeep = append(keep, make([]byte, 16<<20))\n\t}\n}\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "eat")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("build the program: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args string
		want bool
	}{{"", true}, {" panic", false}} {
		// 1.5 GB of address space: enough for the runtime's start, not
		// for the program's appetite.
		cmd := exec.Command("sh", "-c", "ulimit -v 1500000 && exec "+bin+c.args)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil {
			t.Fatalf("%s%s exited 0", bin, c.args)
		}
		if got := goOutOfMemory(stderr.String()); got != c.want {
			t.Errorf("%s%s (%v): goOutOfMemory = %v, want %v; stderr:\n%s", bin, c.args, err, got, c.want, stderr.String())
		}
	}
}
