package local_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// hostileMemoryBound is what one call against a hostile server may make
// the host allocate in all (runtime.MemStats.TotalAlloc, an upper bound on
// what it held at once): 16 sessions doing it at once stay within 4 GiB.
const hostileMemoryBound = 256 << 20

// buildHostileServer builds testdata/hostileserver for the sandbox (a
// static binary) and returns its bytes.
func buildHostileServer(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hostile")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/hostileserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the hostile server: %v\n%s", err, msg)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// armHostile has a command in s put the hostile server in place of its
// runtime server, and attaches to it anew (the session's own client keeps
// connections to the real server).
func armHostile(b *local.Backend, s *goruntime.Session, bin []byte) (goruntime.Sandbox, findings) {
	var f findings
	if f.mustOK(s, goruntime.Request{Files: []goruntime.File{{Path: "hostile", Data: bin}},
		Command: "chmod +x hostile && (setsid ./hostile </dev/null >/dev/null 2>&1 &) && for i in $(seq 50); do test -S /run/sandbox/server.sock && ! test -S /run/sandbox/sandboxd.sock && break; sleep 0.1; done; sleep 0.2"}) == nil {
		return nil, f
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Attach(ctx, s.ID())
	if err != nil {
		f.add("attach to the hostile server: %v", err)
		return nil, f
	}
	return sb, f
}

// hostileSandbox opens a session and arms it (armHostile).
func hostileSandbox(t *testing.T, b *local.Backend, bin []byte) goruntime.Sandbox {
	t.Helper()
	sb, f := armHostile(b, openSession(t, b), bin)
	require(t, f)
	return sb
}

// allocatedBy runs fn and returns the bytes the process allocated
// meanwhile (TotalAlloc) and the most the heap held (HeapInuse, sampled
// every millisecond, above what it held before).
func allocatedBy(fn func()) (total, peak uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > top.Load() {
				top.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	<-sampled
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if p := top.Load(); p > before.HeapInuse {
		peak = p - before.HeapInuse
	}
	return after.TotalAlloc - before.TotalAlloc, peak
}

// hostileMemoryAttack: against a server that answers a listing with 16
// MiB of empty entries (5.6 million), a read of 256 KiB (+1, as read_file
// asks) with 256 MiB that ignore the Range, and an unpack with an endless
// body, the host allocates less than hostileMemoryBound per call; the
// listing fails naming the entry cap. (Before: the listing alone
// allocated about 1 GB, and 63 MiB of entries took mcp-server to 4 GB.)
// sb is armed (armHostile); logf gets what each call allocated. Nothing
// else in the process may allocate meanwhile.
func hostileMemoryAttack(sb goruntime.Sandbox, logf func(string, ...any)) findings {
	var f findings
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var err error
	total, peak := allocatedBy(func() { _, err = sb.List(ctx, "big") })
	logf("list: allocated %d MiB, heap peak +%d MiB: %v", total>>20, peak>>20, err)
	if total > hostileMemoryBound {
		f.add("list of 16 MiB of empty entries allocated %d MiB; want under %d MiB", total>>20, hostileMemoryBound>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "more than 262144 entries") {
		f.add("list of 5.6 million entries: %v; want an error naming the entry cap", err)
	}

	rr := sb.(goruntime.RangeReader)
	var data []byte
	total, peak = allocatedBy(func() { data, err = rr.ReadFileRange(ctx, "big", 0, 256<<10+1) })
	logf("read 256 KiB+1: allocated %d MiB, heap peak +%d MiB: %d bytes, %v", total>>20, peak>>20, len(data), err)
	if total > hostileMemoryBound {
		f.add("read of 256 KiB served as 256 MiB allocated %d MiB; want under %d MiB", total>>20, hostileMemoryBound>>20)
	}
	if err != nil || len(data) != 256<<10+1 {
		f.add("read of 256 KiB+1 from an endless answer: %d bytes, %v; want 262145 bytes", len(data), err)
	}

	archive := bytes.NewReader(make([]byte, 1<<20))
	total, peak = allocatedBy(func() { err = sb.(goruntime.UnpackingSandbox).Unpack(ctx, archive) })
	logf("unpack: allocated %d MiB, heap peak +%d MiB: %v", total>>20, peak>>20, err)
	if total > hostileMemoryBound {
		f.add("unpack answered with an endless body allocated %d MiB; want under %d MiB", total>>20, hostileMemoryBound>>20)
	}
	return f
}

func TestHostileServerMemory(t *testing.T) {
	b := newBackend(t, testOptions())
	check(t, hostileMemoryAttack(hostileSandbox(t, b, buildHostileServer(t)), t.Logf))
}

// silentCalls are the calls hostileSilenceAttack makes, by name.
var silentCalls = map[string]func(context.Context, goruntime.Sandbox) error{
	"list": func(ctx context.Context, sb goruntime.Sandbox) error { _, err := sb.List(ctx, "hang"); return err },
	"read": func(ctx context.Context, sb goruntime.Sandbox) error { _, err := sb.ReadFile(ctx, "hang"); return err },
	"upload": func(ctx context.Context, sb goruntime.Sandbox) error {
		return sb.WriteFile(ctx, "data", bytes.NewReader(make([]byte, 3<<20)))
	},
}

// hostileSilenceAttack: a server that accepts a list, a read or an
// upload (reading it whole; silentCalls[name]) and never answers gets the
// call an error once the call's deadline passes, that names the sandbox
// as stuck and wraps goruntime.ErrSandboxGone, long before the caller's
// own deadline; the sandbox is stopped, so the next call fails the same
// way. sb is armed (armHostile), and its backend's file call deadlines
// are short (SetFileCallDeadlines).
func hostileSilenceAttack(sb goruntime.Sandbox, name string) findings {
	var f findings
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := silentCalls[name](ctx, sb)
	if !errors.Is(err, goruntime.ErrSandboxGone) || !strings.Contains(err.Error(), "stuck") || ctx.Err() != nil {
		f.add("%s against a server that never answers: %v; want ErrSandboxGone naming the sandbox stuck, before the caller's deadline", name, err)
		return f
	}
	if _, err := sb.List(ctx, "."); !errors.Is(err, goruntime.ErrSandboxGone) {
		f.add("the next call: %v; want ErrSandboxGone", err)
	}
	return f
}

// TestHostileServerNeverAnswers: hostileSilenceAttack for each call,
// with deadlines of 2 s plus 1 s per MiB moved.
func TestHostileServerNeverAnswers(t *testing.T) {
	b := newBackend(t, testOptions())
	local.SetFileCallDeadlines(b, 2*time.Second, time.Second)
	bin := buildHostileServer(t)
	for _, name := range slices.Sorted(maps.Keys(silentCalls)) {
		t.Run(name, func(t *testing.T) {
			check(t, hostileSilenceAttack(hostileSandbox(t, b, bin), name))
		})
	}
}
