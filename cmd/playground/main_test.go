package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func TestMain(m *testing.M) {
	// The playground opens local sandboxes in process: the backend
	// re-executes this test binary as the runtime server.
	local.ServeIfChild()
	prepareSeed()
	os.Exit(m.Run())
}

// prepareSeed builds the default state directory's seed build cache
// before the tests: on a fresh machine that takes minutes, which would
// otherwise count against the first run's time limit. A backend that
// cannot start leaves it to the tests, which then fail with the reason.
func prepareSeed() {
	b, err := local.New(local.Options{Relax: localtest.Here()})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := b.Prepare(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "prepare the seed build cache:", err)
	}
	_ = b.Close(context.Background())
}

// logSink collects the server's stderr for the test log on failure.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startPlayground runs the playground in process on the local backend
// (run, as main does) and returns its URL; the test's cleanup stops it
// and checks it exited 0.
func startPlayground(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &logSink{}
	args = append(append(localtest.Flags(t), "--addr=127.0.0.1:0", "--share-dir="+t.TempDir()), args...)
	exited := make(chan int, 1)
	go func() {
		code := run(ctx, args, pw, logs)
		pw.Close()
		exited <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("playground exited %d; its log:\n%s", code, logs)
			}
		case <-time.After(2 * time.Minute):
			t.Errorf("playground still running 2 minutes after its context ended; its log:\n%s", logs)
		}
		if t.Failed() {
			t.Logf("playground log:\n%s", logs)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	if err != nil {
		t.Fatalf("playground printed no URL (%v); its log:\n%s", err, logs)
	}
	// "playground: http://127.0.0.1:PORT/ (backend local)"
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[1], "http://") {
		t.Fatalf("playground's first line %q: want its URL", line)
	}
	return f[1]
}

// requireBwrap fails with the fix when bubblewrap is missing.
func requireBwrap(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		tb.Fatal("bubblewrap (bwrap) is not installed: the local backend needs it; run make deps (scripts/install-deps.sh)")
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "usage: playground"},
		{[]string{"--no-such-flag"}, cliflags.ExitUsage, "flag provided but not defined"},
		{[]string{"stray"}, cliflags.ExitUsage, "stray"},
		{[]string{"--max-share-kb=0"}, cliflags.ExitUsage, "MaxShareBytes 0: must be positive"},
		{[]string{"--max-share-store-mb=0"}, cliflags.ExitUsage, "MaxShareStoreBytes 0: must be positive"},
		{[]string{"--shares-per-minute=0"}, cliflags.ExitUsage, "SharesPerMinute 0: must be positive"},
		{[]string{"--allowed-origin=evil"}, cliflags.ExitUsage, `allowed origin "evil"`},
		{[]string{"--log-level=loud"}, cliflags.ExitUsage, "want debug, info, warn or error"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
