package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func TestHandlesConformance(t *testing.T) {
	b := newBackend(t, testOptions())
	before, _ := b.List()
	if err := goruntimetest.CheckHandles(context.Background(), b, 2*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Every sandbox the check made is gone: none is left running past
	// its handle.
	deadline := time.Now().Add(time.Minute)
	for {
		after, _ := b.List()
		if len(after) <= len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes before the check %v, after %v", before, after)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// handleHelper is the helper process of handle-killed: it makes a handle
// of owner "helper" with the TTL $LOCAL_TEST_HANDLE_TTL, writes kept.txt
// in it, prints "<handle ID> <sandbox directory>" and dies by SIGKILL
// with the handle attached.
func handleHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	ttl, err := time.ParseDuration(os.Getenv("LOCAL_TEST_HANDLE_TTL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h, sb, err := b.CreateHandle(ctx, "helper", goruntime.HandleSpec{TTL: ttl, Labels: map[string]string{"from": "helper"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sb.WriteFile(ctx, "kept.txt", strings.NewReader("kept")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(h.ID, sb.(interface{ Dir() string }).Dir())
	_ = os.Stdout.Sync()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// handleKilled runs the handle-killed helper and returns the handle's ID,
// its sandbox's directory and its bubblewrap's pid.
func handleKilled(t *testing.T, ttl time.Duration) (id, dir string, pid int, m sandboxMeta) {
	t.Helper()
	cmd := helperCmd("handle-killed", "LOCAL_TEST_HANDLE_TTL="+ttl.String())
	out, _ := cmd.Output() // it dies by SIGKILL
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		t.Fatalf("handle helper printed %q", out)
	}
	id, dir = fields[0], fields[1]
	data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pm struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &pm); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return id, dir, pm.PID, m
}

// A handle's sandbox outlives the process that made it, killed while it
// had the handle attached: another process attaches by ID and finds its
// files; deleting it leaves nothing behind.
func TestHandleOutlivesItsOpener(t *testing.T) {
	id, dir, pid, m := handleKilled(t, time.Hour)
	b := newBackend(t, testOptions())
	ctx := context.Background()
	if _, _, err := b.AttachHandle(ctx, "someone-else", id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("another owner attached: %v", err)
	}
	h, sb, err := b.AttachHandle(ctx, "helper", id)
	if err != nil {
		t.Fatalf("attach after the opener was killed: %v", err)
	}
	data, err := sb.ReadFile(ctx, "kept.txt")
	if err != nil || string(data) != "kept" {
		t.Fatalf("kept.txt = %q, %v", data, err)
	}
	if h.Labels["from"] != "helper" {
		t.Errorf("labels %v", h.Labels)
	}
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteHandle(ctx, "helper", id); err != nil {
		t.Fatal(err)
	}
	assertSandboxGone(t, dir, pid, m)
	if _, _, err := b.AttachHandle(ctx, "helper", id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("attach after delete: %v", err)
	}
}

// A handle's sandbox whose opener was killed and that no process uses
// ends itself once idle past its TTL (its server's --idle-exit); the next
// backend on the state directory removes what it left at start-up.
func TestHandleSandboxEndsItselfWhenIdle(t *testing.T) {
	id, dir, pid, m := handleKilled(t, 2*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox (bubblewrap pid %d) still runs 60 s after its 2 s idle TTL with no backend running", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log", "server.log"))
	if len(log) > 0 && !strings.Contains(string(log), "idle past --idle-exit") {
		t.Errorf("the server's log does not say it ended for being idle:\n%s", log)
	}
	b := newBackend(t, testOptions())
	assertSandboxGone(t, dir, pid, m)
	hs, err := b.ListHandles(context.Background(), "helper")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.ID == id {
			t.Errorf("expired handle %s still listed", id)
		}
	}
	if _, _, err := b.AttachHandle(context.Background(), "helper", id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("attach an expired handle: %v", err)
	}
}

// assertSandboxGone waits (a minute) for a sandbox's directory, processes and
// cgroups to be gone.
func assertSandboxGone(t *testing.T, dir string, pid int, m sandboxMeta) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var left []string
		if _, err := os.Stat(dir); err == nil {
			left = append(left, dir)
		}
		if syscall.Kill(pid, 0) == nil {
			left = append(left, fmt.Sprintf("pid %d", pid))
		}
		for _, cg := range []string{m.Cgroup.Memory, m.Cgroup.Pids, m.Cgroup.CPU} {
			if cg == "" {
				continue
			}
			if _, err := os.Stat(cg); err == nil {
				left = append(left, cg)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkHandle: creating a handle (a sandbox started, not claimed from
// the warm pool), and one call's attach, command and release on it (what
// mcp-server does for a call with sandbox_id), beside the same command on
// a sandbox held open.
func BenchmarkHandle(b *testing.B) {
	be := newBackend(b, testOptions())
	ctx := context.Background()
	b.Run("open", func(b *testing.B) { // the baseline: Open without a warm pool
		for b.Loop() {
			sb, err := be.Open(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = sb.Close(ctx)
			b.StartTimer()
		}
	})
	b.Run("create", func(b *testing.B) {
		for b.Loop() {
			h, sb, err := be.CreateHandle(ctx, "bench", goruntime.HandleSpec{TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = sb.Disconnect(ctx)
			_ = be.DeleteHandle(ctx, "bench", h.ID)
			b.StartTimer()
		}
	})
	h, sb, err := be.CreateHandle(ctx, "bench", goruntime.HandleSpec{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = be.DeleteHandle(ctx, "bench", h.ID) }()
	b.Run("held", func(b *testing.B) {
		for b.Loop() {
			if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	_ = sb.Disconnect(ctx)
	b.Run("attach-exec-release", func(b *testing.B) {
		for b.Loop() {
			_, sb, err := be.AttachHandle(ctx, "bench", h.ID)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
			if err := sb.Disconnect(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A handle's sandbox cannot be attached by its internal sandbox ID
// (Backend.Attach, mcp-server --claim): that would skip the owner check,
// the lock that keeps reapers off it and the renewal of its TTL. Its
// handle still works afterwards, and CountHandles counts it.
func TestHandleSandboxNotAttachedByID(t *testing.T) {
	b := newBackend(t, testOptions())
	ctx := context.Background()
	h, sb, err := b.CreateHandle(ctx, "by-id", goruntime.HandleSpec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteHandle(context.Background(), "by-id", h.ID) })
	internal := sb.ID()
	if err := sb.WriteFile(ctx, "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.CountHandles(ctx); err != nil || n < 1 {
		t.Errorf("CountHandles = %d, %v with a live handle", n, err)
	}
	if s2, err := b.Attach(ctx, internal); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		if s2 != nil {
			_ = s2.Disconnect(ctx)
		}
		t.Fatalf("Attach(%s), a handle's sandbox by its ID: %v, want ErrSandboxNotFound", internal, err)
	}
	_, sb2, err := b.AttachHandle(ctx, "by-id", h.ID)
	if err != nil {
		t.Fatalf("AttachHandle after the refused Attach: %v", err)
	}
	defer sb2.Disconnect(ctx)
	if data, err := sb2.ReadFile(ctx, "kept.txt"); err != nil || string(data) != "kept" {
		t.Fatalf("kept.txt = %q, %v", data, err)
	}
}
