package agentsandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func TestTimedOut(t *testing.T) {
	const term = "timeout: sending signal TERM to command ‘/bin/sh’\n"
	const kill = "timeout: sending signal KILL to command '/bin/sh'\n"
	for _, tc := range []struct {
		name       string
		exit       int
		stderr     string
		hit        bool
		wantStderr string
	}{
		{"term", 124, "partial\n" + term, true, "partial\n"},
		{"kill via server", 137, "x\n" + term + kill + "[sandbox-server: command killed by signal 9 (killed)]\n", true, "x\n"},
		{"kill, signal as -9", -9, term + kill, true, ""},
		{"own exit 124", 124, "failed\n", false, "failed\n"},
		{"marker not last", 124, term + "more output\n", false, term + "more output\n"},
		{"marker for another command", 124, "timeout: sending signal TERM to command 'sleep'\n", false, "timeout: sending signal TERM to command 'sleep'\n"},
		{"other exit code", 1, term, false, term},
		{"signal 9 without marker", 137, "[sandbox-server: command killed by signal 9 (killed)]\n", false, "[sandbox-server: command killed by signal 9 (killed)]\n"},
	} {
		hit, stderr := timedOut(tc.exit, tc.stderr)
		if hit != tc.hit || stderr != tc.wantStderr {
			t.Errorf("%s: timedOut = %v, %q; want %v, %q", tc.name, hit, stderr, tc.hit, tc.wantStderr)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30s",
		1500 * time.Millisecond: "1.5s",
		time.Microsecond:        "0.001s",
		0:                       "0.001s",
		1001 * time.Microsecond: "0.002s",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestExecCommandSizeLimit: a command up to MaxCommandBytes runs through
// the real runtime server (wrapped in timeout … /bin/sh -c); a longer one
// is refused before anything is sent, with an error naming the limit.
func TestExecCommandSizeLimit(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	command := func(n int) string {
		const head, tail = "echo start; : ", "\necho end"
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: command(MaxCommandBytes), Timeout: 30 * time.Second, Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatalf("command of %d bytes: %v", MaxCommandBytes, err)
	}
	if res.Stdout != "start\nend\n" || res.ExitCode != 0 {
		t.Fatalf("command of %d bytes: stdout %q stderr %.300q exit %d", MaxCommandBytes, res.Stdout, res.Stderr, res.ExitCode)
	}
	for _, n := range []int{MaxCommandBytes + 1, 1 << 20} {
		r.mu.Lock()
		sent := len(r.headers)
		r.mu.Unlock()
		_, err := sb.Exec(ctx, goruntime.ExecRequest{Command: command(n), Timeout: 30 * time.Second})
		if !errors.Is(err, goruntime.ErrTooLarge) || !strings.Contains(err.Error(), "128 KiB") {
			t.Errorf("command of %d bytes: err %v, want ErrTooLarge naming the 128 KiB argument limit", n, err)
		}
		r.mu.Lock()
		sent = len(r.headers) - sent
		r.mu.Unlock()
		if sent != 0 {
			t.Errorf("command of %d bytes: %d requests sent", n, sent)
		}
	}
}
