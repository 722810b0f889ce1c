package local_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// hostOwner is the host uid a sandbox's /app/<name> belongs to.
func hostOwner(t *testing.T, sb *local.Sandbox, name string) int {
	t.Helper()
	fi, err := os.Stat(filepath.Join(sb.Dir(), "app", name))
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func rawSandbox(t *testing.T, b *local.Backend) *local.Sandbox {
	t.Helper()
	sb, err := b.Open(context.Background())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb.(*local.Sandbox)
}

func sh(t *testing.T, sb *local.Sandbox, command string) *goruntime.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), goruntime.ExecRequest{Command: command})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

// TestHostUIDOwnsFiles: as root, a file a sandbox writes in /app belongs
// on the host to the sandbox's own unprivileged uid (not 0, not another
// sandbox's), while inside it is uid 1000; and one sandbox's uid cannot
// read another's files by their host path (an escaped process would be
// that uid), though the owner's can.
func TestHostUIDOwnsFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes get host uids of their own only when the backend runs as root")
	}
	b := newBackend(t, testOptions())
	a, c := rawSandbox(t, b), rawSandbox(t, b)
	for _, sb := range []*local.Sandbox{a, c} {
		if res := sh(t, sb, "id -u > uid && echo secret-$RANDOM > secret && chmod 644 secret && cat uid"); strings.TrimSpace(res.Stdout) != "1000" {
			t.Fatalf("uid inside %q (stderr %q), want 1000", res.Stdout, res.Stderr)
		}
	}
	ua, uc := hostOwner(t, a, "secret"), hostOwner(t, c, "secret")
	for _, u := range []int{ua, uc} {
		if u < local.DefaultHostUIDBase || u >= local.DefaultHostUIDBase+local.DefaultHostUIDCount {
			t.Errorf("file owned by host uid %d, want one of the sandbox range %d+%d", u, local.DefaultHostUIDBase, local.DefaultHostUIDCount)
		}
	}
	if ua == uc {
		t.Errorf("two live sandboxes share host uid %d", ua)
	}
	// Where Dir()/app leads: A's disk, as A's bubblewrap sees it
	// (/proc/<pid>/root/..., a link EvalSymlinks cannot follow).
	aApp, err := os.Readlink(filepath.Join(a.Dir(), "app"))
	if err != nil {
		t.Fatal(err)
	}
	aPath := filepath.Join(aApp, "secret")
	readAs := func(uid int, path string) error {
		return exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups", "cat", path).Run()
	}
	if err := readAs(ua, aPath); err != nil {
		t.Fatalf("sandbox A's own uid cannot read %s (%v): the check below would prove nothing", aPath, err)
	}
	for _, p := range []string{aPath, filepath.Join(a.Dir(), "app", "secret"), filepath.Join(a.Dir(), "sandbox.json")} {
		if err := readAs(uc, p); err == nil {
			t.Errorf("sandbox C's host uid %d read sandbox A's %s", uc, p)
		}
	}
	mustSh := func(sb *local.Sandbox) {
		if res := sh(t, sb, "cat secret"); res.ExitCode != 0 {
			t.Errorf("next command: exit %d %q", res.ExitCode, res.Stderr)
		}
	}
	mustSh(a)
	mustSh(c)
}

// freeBytes is the free space of the file system holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// imageBytes is the host disk space a sandbox's disk image takes now.
func imageBytes(t *testing.T, b *local.Backend, id string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Disk struct {
			Image string `json:"image"`
		} `json:"disk"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Disk.Image == "" {
		t.Fatalf("sandbox.json names no disk image: %s (%v)", data, err)
	}
	syscall.Sync() // the loop device writes the image through the host's page cache
	var st syscall.Stat_t
	if err := syscall.Stat(m.Disk.Image, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestDiskQuotaBytes: a sandbox writing past its byte quota gets ENOSPC,
// reported as Limit disk / outcome disk_limit with a note naming the
// quota; meanwhile the host loses at most the quota (its disk image is
// sparse and stops there; the host's free space, which other processes
// move too, drops by no more than the quota plus noise), and gets the
// space back when the sandbox deletes the file; the next command works.
func TestDiskQuotaBytes(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	opts.DiskBytes = 64 << 20
	opts.DiskInodes = 16384 // 4 MiB of inode tables
	b := newBackend(t, opts)
	s := openSession(t, b)
	imgBefore := imageBytes(t, b, s.ID())
	freeBefore := freeBytes(t, b.StateDir())
	res := run(t, s, goruntime.Request{Command: "head -c 200M /dev/zero > big; ls -l big"})
	imgFull, freeFull := imageBytes(t, b, s.ID()), freeBytes(t, b.StateDir())
	if res.Outcome != goruntime.OutcomeDiskLimit {
		t.Errorf("outcome %s (exit %d, stderr %q), want disk_limit", res.Outcome, res.ExitCode, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "disk quota is full: 64 MiB") {
		t.Errorf("stderr does not name the quota: %q", res.Stderr)
	}
	if grown := imgFull - imgBefore; grown < 48<<20 || grown > 64<<20 {
		t.Errorf("the disk image grew by %d MiB while the sandbox filled a 64 MiB quota", grown>>20)
	}
	if used := freeBefore - freeFull; used > 128<<20 {
		t.Errorf("the host's file system lost %d MiB while a sandbox filled a 64 MiB quota", used>>20)
	}
	res = mustOK(t, s, goruntime.Request{Command: "rm big && echo fine > small && cat small"})
	if res.Outcome != goruntime.OutcomeOK || strings.TrimSpace(res.Stdout) != "fine" {
		t.Errorf("after cleanup: outcome %s, stdout %q", res.Outcome, res.Stdout)
	}
	if left := imageBytes(t, b, s.ID()) - imgBefore; left > 4<<20 {
		t.Errorf("the host did not get the space back: the disk image still holds %d MiB more than before", left>>20)
	}
}

// TestDiskQuotaInodes: creating files past the inode quota fails with
// ENOSPC and is reported as disk_limit naming the inode quota; after the
// files are deleted the sandbox works (go run included).
func TestDiskQuotaInodes(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	opts.DiskBytes = 64 << 20
	opts.DiskInodes = local.MinDiskInodes
	s := openSession(t, newBackend(t, opts))
	res := run(t, s, goruntime.Request{Command: `mkdir many && cd many && i=0; while printf '' > f$i; do i=$((i+1)); done; echo $i`})
	if res.Outcome != goruntime.OutcomeDiskLimit {
		t.Errorf("outcome %s (exit %d, stdout %q, stderr %q), want disk_limit", res.Outcome, res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "inode quota is used up") {
		t.Errorf("stderr does not name the inode quota: %q", res.Stderr)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n < local.MinDiskInodes/2 || n > local.MinDiskInodes {
		t.Errorf("created %s files with an inode quota of %d", res.Stdout, local.MinDiskInodes)
	}
	mustOK(t, s, goruntime.Request{Command: "rm -rf many"})
	res = mustOK(t, s, goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}, Command: "go run main.go"})
	if res.Outcome != goruntime.OutcomeOK {
		t.Errorf("go run after cleanup: %s %q", res.Outcome, res.Stderr)
	}
}

const raceMain = `package main

// #include <stdlib.h>
// static int twice(int x) { return 2 * x; }
import "C"

import (
	"fmt"
	"sync"
)

func main() {
	var n int
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); n++ }()
	}
	wg.Wait()
	fmt.Println("cgo says", C.twice(21), n)
}
`

// TestRaceDetectorAndCgoUnderFilter: the race detector (ThreadSanitizer,
// which maps its shadow memory and re-execs itself) and cgo with gcc work
// under the seccomp filter: a program calling C and racing on a counter
// builds with -race, prints the C result and is reported with exit 66.
func TestRaceDetectorAndCgoUnderFilter(t *testing.T) {
	if testing.Short() {
		t.Skip("-race rebuilds the standard library: minutes on 2 cores")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc on this host")
	}
	s := openSession(t, newBackend(t, testOptions()))
	res := run(t, s, goruntime.Request{Files: []goruntime.File{{Path: "go.mod", Data: []byte("module r\n\ngo 1.24\n")}, {Path: "main.go", Data: []byte(raceMain)}},
		Command: "CGO_ENABLED=1 go build -race -o app . && ./app", Timeout: 9 * time.Minute})
	if res.ExitCode != 66 || !strings.Contains(res.Stdout, "cgo says 42") || !strings.Contains(res.Stderr, "Found 1 data race") {
		t.Errorf("exit %d, outcome %s\nstdout %s\nstderr %.3000s", res.ExitCode, res.Outcome, res.Stdout, res.Stderr)
	}
	mustOK(t, s, goruntime.Request{Command: "./app >/dev/null 2>&1; echo next"})
}

// TestNoCapabilities: a sandbox's commands hold no capability in any set,
// whoever started the backend: nothing the gate held to mount the disk or
// take the sandbox's ids (unshare --keep-caps puts them in the ambient
// and inheritable sets) reaches them.
func TestNoCapabilities(t *testing.T) {
	sb := rawSandbox(t, newBackend(t, testOptions()))
	res := sh(t, sb, `grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status | tr -s '\t ' ' '`)
	want := "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapAmb: 0000000000000000\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Errorf("a command's capabilities: exit %d, %q (stderr %q), want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
}
