package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// openAs runs a call of client key, made by principal, that needs a
// sandbox; ended, when not nil, ends the client when closed.
func openAs(p *Pool, key, principal string, ended chan struct{}) error {
	c := Call{Key: key, Principal: principal, Open: true}
	if ended != nil {
		c.Ended = func() <-chan struct{} { return ended }
	}
	return p.Do(context.Background(), c, func(*goruntime.Session, time.Duration) error { return nil })
}

// held is what the pool counts of principal now.
func held(p *Pool, principal string) use {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byPrincipal[principal]
}

// counted reports whether the pool counts nothing at all: no session
// sandbox, none being made, no principal.
func counted(p *Pool) (open, making, principals int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.making, len(p.byPrincipal)
}

// waitHeld waits until principal holds want session sandboxes in the
// pool (a client's end is handled in the background).
func waitHeld(t *testing.T, p *Pool, principal string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for held(p, principal).sessions != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %+v, want %d sessions' sandboxes", principal, held(p, principal), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPrincipalShare: a principal past MaxPerPrincipal is refused with
// ErrPrincipalFull naming its count; another principal still opens its
// own; a call in a sandbox already open is never refused; a client that
// ends gives its principal's slot back.
func TestPrincipalShare(t *testing.T) {
	p, _ := newPool(t, Config{MaxSandboxes: 8, MaxPerPrincipal: 2})
	ended := make(chan struct{})
	if err := openAs(p, "a1", "alice", ended); err != nil {
		t.Fatal(err)
	}
	if err := openAs(p, "a2", "alice", nil); err != nil {
		t.Fatal(err)
	}
	err := openAs(p, "a3", "alice", nil)
	if !errors.Is(err, ErrPrincipalFull) || errors.Is(err, ErrTooManySandboxes) ||
		!strings.Contains(err.Error(), `"alice" already holds 2 of the 2`) || !strings.Contains(err.Error(), "(2 for its sessions, 0 durable)") {
		t.Fatalf("alice's third sandbox with a share of 2: %v, want ErrPrincipalFull naming 2 of 2", err)
	}
	if err := openAs(p, "a2", "alice", nil); err != nil {
		t.Fatalf("a call in alice's open sandbox while she is at her share: %v", err)
	}
	for _, key := range []string{"b1", "b2"} {
		if err := openAs(p, key, "bob", nil); err != nil {
			t.Fatalf("bob's %s while alice is at her share: %v", key, err)
		}
	}
	if err := openAs(p, "b3", "bob", nil); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("bob's third: %v, want ErrPrincipalFull", err)
	}
	close(ended)
	waitHeld(t, p, "alice", 1)
	if err := openAs(p, "a3", "alice", nil); err != nil {
		t.Fatalf("alice's sandbox after one of her clients ended: %v", err)
	}
	if p.Open() != 4 {
		t.Errorf("%d open, want 4", p.Open())
	}
}

// TestPrincipalShareCountsOthersOf: a principal's sandboxes outside the
// pool (its handles, Config.OthersOf) count against its share, for a
// session's open and for Reserve; a reservation counts until done; a
// failed count refuses.
func TestPrincipalShareCountsOthersOf(t *testing.T) {
	var handles sync.Map // principal → int
	var countErr atomic.Pointer[error]
	p, _ := newPool(t, Config{MaxPerPrincipal: 2, OthersOf: func(_ context.Context, principal string) (int, error) {
		if e := countErr.Load(); e != nil {
			return 0, *e
		}
		n, _ := handles.Load(principal)
		i, _ := n.(int)
		return i, nil
	}})
	handles.Store("alice", 1)
	if err := openAs(p, "a1", "alice", nil); err != nil {
		t.Fatal(err)
	}
	err := openAs(p, "a2", "alice", nil)
	if !errors.Is(err, ErrPrincipalFull) || !strings.Contains(err.Error(), "(1 for its sessions, 1 durable)") {
		t.Fatalf("alice's second session with a handle and a share of 2: %v", err)
	}
	if _, err := p.Reserve(context.Background(), "alice"); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("Reserve for alice at her share: %v", err)
	}

	done, err := p.Reserve(context.Background(), "bob")
	if err != nil {
		t.Fatalf("Reserve for bob: %v", err)
	}
	if err := openAs(p, "b1", "bob", nil); err != nil {
		t.Fatalf("bob's session beside his reservation: %v", err)
	}
	if err := openAs(p, "b2", "bob", nil); !errors.Is(err, ErrPrincipalFull) || !strings.Contains(err.Error(), "(1 for its sessions, 1 durable)") {
		t.Fatalf("bob's second session while his create is in flight: %v", err)
	}
	done()
	done() // a second done gives back nothing more
	if u := held(p, "bob"); u != (use{sessions: 1}) {
		t.Fatalf("bob after done: %+v, want his one session", u)
	}
	if err := openAs(p, "b2", "bob", nil); err != nil {
		t.Fatalf("bob's second session once his create was done: %v", err)
	}

	broken := errors.New("cluster unreachable")
	countErr.Store(&broken)
	if err := openAs(p, "c1", "carol", nil); !errors.Is(err, broken) || !strings.Contains(err.Error(), `"carol"`) {
		t.Fatalf("open while the count fails: %v, want its error", err)
	}
	if u := held(p, "carol"); u != (use{}) {
		t.Fatalf("a refused open is counted: %+v", u)
	}
}

// failingOpen is the fake backend with Open failing while fail is set.
type failingOpen struct {
	*goruntimetest.Backend
	fail atomic.Bool
}

func (b *failingOpen) Open(ctx context.Context) (goruntime.Sandbox, error) {
	if b.fail.Load() {
		return nil, errors.New("no room on the host")
	}
	return b.Backend.Open(ctx)
}

// TestPrincipalShareReleased: every way a sandbox ends gives its slot
// back to its principal, and to the server: a failed open, a sandbox
// gone, the idle reaper, a client's end, a reservation's done, the pool's
// Close. Nothing is left counted.
func TestPrincipalShareReleased(t *testing.T) {
	b := &failingOpen{Backend: goruntimetest.New(t.TempDir())}
	p := New(Config{Backend: b, OpenTimeout: time.Minute, MaxSandboxes: 1, MaxPerPrincipal: 1})
	defer p.Close(context.Background())
	// again checks that alice, with a share of 1, can open a sandbox
	// (in a client that then ends) and that nothing stays counted.
	again := func(why string) {
		t.Helper()
		ended := make(chan struct{})
		if err := openAs(p, "probe after "+why, "alice", ended); err != nil {
			t.Fatalf("after %s: alice's open: %v", why, err)
		}
		close(ended)
		waitHeld(t, p, "alice", 0)
		if o, m, n := counted(p); o != 0 || m != 0 || n != 0 {
			t.Fatalf("after %s: open %d, making %d, principals %d counted; want none", why, o, m, n)
		}
	}

	b.fail.Store(true)
	if err := openAs(p, "a", "alice", nil); err == nil || !strings.Contains(err.Error(), "no room on the host") {
		t.Fatalf("open on a failing backend: %v", err)
	}
	b.fail.Store(false)
	again("a failed open")

	var gone string
	err := p.Do(context.Background(), Call{Key: "a", Principal: "alice", Open: true}, func(sess *goruntime.Session, _ time.Duration) error {
		gone = sess.ID()
		b.Sandbox(gone).Kill()
		_, err := sess.Execute(context.Background(), goruntime.Request{Command: "true"})
		return err
	})
	if !errors.Is(err, goruntime.ErrSandboxGone) {
		t.Fatalf("call in a killed sandbox: %v", err)
	}
	again("a sandbox gone")

	if err := openAs(p, "a", "alice", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // idle for longer than the reaper's 1ns
	if n := p.Reap(context.Background(), time.Nanosecond); n != 1 {
		t.Fatalf("Reap closed %d, want 1", n)
	}
	again("the reaper")

	ended := make(chan struct{})
	if err := openAs(p, "e", "alice", ended); err != nil {
		t.Fatal(err)
	}
	close(ended)
	waitHeld(t, p, "alice", 0)
	again("the client's end")

	done, err := p.Reserve(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := openAs(p, "x", "alice", nil); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("open during a reservation: %v", err)
	}
	done()
	again("a reservation's done")

	if err := openAs(p, "c", "alice", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o, m, n := counted(p); o != 0 || m != 0 || n != 0 {
		t.Fatalf("after Close: open %d, making %d, principals %d counted; want none", o, m, n)
	}
}

// TestPrincipalShareUnderConcurrentOpens: opens of one principal racing
// each other never pass its share together.
func TestPrincipalShareUnderConcurrentOpens(t *testing.T) {
	p, _ := newPool(t, Config{MaxPerPrincipal: 3})
	var (
		mu       sync.Mutex
		ok, full int
		dones    []func()
		wg       sync.WaitGroup
	)
	for i := range 12 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				err = openAs(p, fmt.Sprint("client ", i), "alice", nil)
			} else {
				var done func()
				done, err = p.Reserve(context.Background(), "alice")
				if err == nil {
					mu.Lock()
					dones = append(dones, done) // held until all have tried
					mu.Unlock()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrPrincipalFull):
				full++
			default:
				t.Errorf("open %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if u := held(p, "alice"); ok != 3 || full != 9 || u.sessions+u.making != 3 {
		t.Fatalf("12 racing opens with a share of 3: %d passed, %d refused, alice holds %+v; want 3 passed", ok, full, u)
	}
	for _, done := range dones {
		done()
	}
	if u := held(p, "alice"); u.making != 0 {
		t.Fatalf("after every done: alice holds %+v", u)
	}
}
