package sessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

func newPool(t *testing.T, cfg Config) (*Pool, *goruntimetest.Backend) {
	t.Helper()
	b := goruntimetest.New(t.TempDir())
	cfg.Backend = b
	if cfg.OpenTimeout == 0 {
		cfg.OpenTimeout = time.Minute
	}
	p := New(cfg)
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return p, b
}

func run(t *testing.T, p *Pool, key, command string) string {
	t.Helper()
	var id string
	err := p.Do(context.Background(), Call{Key: key, Open: true}, func(sess *goruntime.Session, _ time.Duration) error {
		id = sess.ID()
		res, err := sess.Execute(context.Background(), goruntime.Request{Command: command})
		if err == nil && res.ExitCode != 0 {
			err = errors.New(res.Stderr)
		}
		return err
	})
	if err != nil {
		t.Fatalf("client %q: %s: %v", key, command, err)
	}
	return id
}

// TestOneSandboxPerClientInTurn: each client gets a sandbox of its own,
// kept across its calls, and its calls run one at a time.
func TestOneSandboxPerClientInTurn(t *testing.T) {
	p, b := newPool(t, Config{})
	a1, a2, c := run(t, p, "a", "echo x > f"), run(t, p, "a", "test -f f"), run(t, p, "c", "! test -f f")
	if a1 != a2 || a1 == c || b.Opened() != 2 || p.Open() != 2 {
		t.Fatalf("sandboxes a %s then %s, c %s; opened %d, open %d: want a's kept, c's another", a1, a2, c, b.Opened(), p.Open())
	}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = p.Do(context.Background(), Call{Key: "a", Open: true}, func(*goruntime.Session, time.Duration) error {
				n := inside.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d calls of one client ran at once, want 1", most.Load())
	}
}

// TestMaxSandboxesAndEndedClients: past MaxSandboxes a new client's call
// fails with ErrTooManySandboxes; a client that ends gives its sandbox
// back (closed), and the next client gets one.
func TestMaxSandboxesAndEndedClients(t *testing.T) {
	p, b := newPool(t, Config{MaxSandboxes: 1})
	ended := make(chan struct{})
	err := p.Do(context.Background(), Call{Key: "a", Open: true, Ended: func() <-chan struct{} { return ended }},
		func(*goruntime.Session, time.Duration) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	err = p.Do(context.Background(), Call{Key: "b", Open: true}, func(*goruntime.Session, time.Duration) error { return nil })
	if !errors.Is(err, ErrTooManySandboxes) || !strings.Contains(err.Error(), "1 of 1 in use") {
		t.Fatalf("second client: %v, want ErrTooManySandboxes", err)
	}
	close(ended)
	deadline := time.Now().Add(10 * time.Second)
	for b.Closed() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b.Closed() != 1 || p.Open() != 0 {
		t.Fatalf("after client a ended: closed %d, open %d; want 1 and 0", b.Closed(), p.Open())
	}
	run(t, p, "b", "true")
}

// TestMaxSandboxesCountsOthers: sandboxes outside the pool (a front
// end's handles, Config.Others) count against MaxSandboxes too, for a
// session's open and for Reserve; a failed count refuses rather than
// opening past the bound unknowingly.
func TestMaxSandboxesCountsOthers(t *testing.T) {
	var others atomic.Int64
	var countErr atomic.Pointer[error]
	p, _ := newPool(t, Config{MaxSandboxes: 2, Others: func(context.Context) (int, error) {
		if e := countErr.Load(); e != nil {
			return 0, *e
		}
		return int(others.Load()), nil
	}})
	others.Store(1)
	run(t, p, "a", "true") // 1 handle + 1 session
	if _, err := p.Reserve(context.Background(), "x"); !errors.Is(err, ErrTooManySandboxes) || !strings.Contains(err.Error(), "2 of 2 in use (1 for sessions, 1 durable)") {
		t.Fatalf("Reserve with 1 session and 1 handle of 2: %v", err)
	}
	err := p.Do(context.Background(), Call{Key: "b", Open: true}, func(*goruntime.Session, time.Duration) error { return nil })
	if !errors.Is(err, ErrTooManySandboxes) {
		t.Fatalf("second session with a handle open: %v, want ErrTooManySandboxes", err)
	}
	others.Store(0)
	done, err := p.Reserve(context.Background(), "x")
	if err != nil {
		t.Fatalf("Reserve once the handle went: %v", err)
	}
	done()
	broken := errors.New("cluster unreachable")
	countErr.Store(&broken)
	err = p.Do(context.Background(), Call{Key: "b", Open: true}, func(*goruntime.Session, time.Duration) error { return nil })
	if !errors.Is(err, broken) {
		t.Fatalf("open while the count fails: %v, want its error", err)
	}
	countErr.Store(nil)
	run(t, p, "b", "true")
}

// TestGoneAndReaped: a sandbox fn finds gone is forgotten (the next call
// opens another); Reap closes an idle one and the next call is told how
// long it sat idle.
func TestGoneAndReaped(t *testing.T) {
	p, b := newPool(t, Config{})
	first := run(t, p, "a", "true")
	b.Sandbox(first).Kill()
	err := p.Do(context.Background(), Call{Key: "a", Open: true}, func(sess *goruntime.Session, _ time.Duration) error {
		_, err := sess.Execute(context.Background(), goruntime.Request{Command: "true"})
		return err
	})
	if !errors.Is(err, goruntime.ErrSandboxGone) {
		t.Fatalf("call in a killed sandbox: %v, want ErrSandboxGone", err)
	}
	second := run(t, p, "a", "true")
	if second == first {
		t.Fatalf("the gone sandbox %s was used again", first)
	}
	time.Sleep(30 * time.Millisecond)
	if n := p.Reap(context.Background(), 10*time.Millisecond); n != 1 || b.Sandbox(second) != nil {
		t.Fatalf("Reap closed %d, sandbox %s still open: %v", n, second, b.Sandbox(second) != nil)
	}
	var reaped time.Duration
	_ = p.Do(context.Background(), Call{Key: "a", Open: true}, func(_ *goruntime.Session, r time.Duration) error { reaped = r; return nil })
	if reaped < 10*time.Millisecond {
		t.Errorf("the call after Reap was told the sandbox sat idle %v, want over 10ms", reaped)
	}
}

// TestPersistentClaim: with Persistent, the process-wide client's sandbox
// is left running on Close, and a pool with it as Claim attaches to it.
func TestPersistentClaim(t *testing.T) {
	b := goruntimetest.New(t.TempDir())
	p := New(Config{Backend: b, OpenTimeout: time.Minute, Persistent: true})
	id := run(t, p, ProcessKey, "echo kept > f")
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Live() != 1 {
		t.Fatalf("Persistent: %d sandboxes live after Close, want 1", b.Live())
	}
	q := New(Config{Backend: b, OpenTimeout: time.Minute, Claim: id})
	defer q.Close(context.Background())
	if got := run(t, q, ProcessKey, "grep -q kept f"); got != id || b.Opened() != 1 {
		t.Fatalf("Claim %s: used %s, opened %d; want the claimed sandbox", id, got, b.Opened())
	}
	if err := p.Do(context.Background(), Call{Key: "x", Open: true}, func(*goruntime.Session, time.Duration) error { return nil }); !errors.Is(err, goruntime.ErrClosed) {
		t.Errorf("call on a closed pool: %v, want ErrClosed", err)
	}
}
