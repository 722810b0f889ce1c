package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// Tests of when the warm pool refills and to how many (poolsettle.go): a
// fresh pool's first sandbox alone, after a claim's first commands, past
// its size while Opens outrun it.

// TestWarmPoolStartsFirstAlone: a fresh pool starts one sandbox, and the
// rest of its size only once that one has waited unclaimed a while
// (poolRefillDelay, 2 s). The test times the wait from the last look that
// found no sandbox ready, a time before the first was, so a look a busy
// machine runs late can only lengthen what it measures.
func TestWarmPoolStartsFirstAlone(t *testing.T) {
	b := newBackend(t, poolOptions(2))
	if n := b.WarmPoolReady(); n != 0 {
		t.Skipf("the pool's first sandbox was ready before the test looked (%d ready)", n)
	}
	most := 0
	var notReady time.Time
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Millisecond) {
		now := time.Now()
		if b.WarmPoolReady() != 0 {
			break
		}
		notReady = now
		if now.After(deadline) {
			t.Fatal("the pool's first sandbox was not ready after 3 minutes")
		}
		most = max(most, local.WarmPoolStarting(b))
	}
	if most > 1 {
		t.Errorf("%d pool starts under way at once before the first was ready, want 1", most)
	}
	for deadline := time.Now().Add(3 * time.Minute); local.WarmPoolStarting(b) == 0 && b.WarmPoolReady() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool started no second sandbox within 3 minutes of its first being ready")
		}
	}
	if waited := time.Since(notReady); waited < 2*time.Second {
		t.Errorf("the pool started its second sandbox at most %v after its first was ready, want 2 s", waited.Round(time.Millisecond))
	}
	waitPool(t, b, 2)
}

// TestWarmPoolGrowsWithDemand: Opens that find the pool empty and no
// start of it to wait for make it keep more sandboxes ready, and once
// none has had to start its own for a while it goes back to its size,
// closing what waits past it. The grown size is kept (an hour) until the
// test has seen it, then given 1 s: a busy machine's slow refill cannot
// outlast it.
func TestWarmPoolGrowsWithDemand(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	local.SetWarmPoolShrinkAfter(b, time.Hour)
	waitPool(t, b, 1)
	var claimed []*goruntime.Session
	for range 4 {
		claimed = append(claimed, openSession(t, b))
	}
	for _, s := range claimed {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	most := mostReady(b, 2)
	if most < 2 {
		t.Fatalf("after 4 Opens at once against a pool of 1, the pool held at most %d ready: it did not grow", most)
	}
	// Back to its size once no Open found it empty for a second.
	local.SetWarmPoolShrinkAfter(b, time.Second)
	for deadline := time.Now().Add(time.Minute); b.WarmPoolReady() != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the Opens, the pool still holds %d, want its size, 1", b.WarmPoolReady())
		}
	}
}

// TestWarmPoolGrowsWhenOpensWait: an Open that finds the pool empty grows
// it even when it then takes a pool start under way rather than starting
// its own: Opens paced so that each waits for the pool's last start are
// Opens the pool is too small for (at 10 a second with 1,000 live, a pool
// that grew only on Opens starting their own kept each waiting). The
// start slots are held while the claim closes, so its refill is still
// under way when the next Open comes, however busy the machine.
func TestWarmPoolGrowsWhenOpensWait(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, poolOptions(1))
	local.SetWarmPoolShrinkAfter(b, time.Hour)
	waitPool(t, b, 1)
	release := local.HoldStarts(b)
	defer release()
	if err := openSession(t, b).Close(ctx); err != nil { // a closed claim refills at once
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStarting(b) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a minute after a claim was closed, the pool of 1 started no sandbox")
		}
	}
	// The Open finds the pool empty and its start under way, and waits
	// for it: the start gets its slot.
	opened := make(chan error, 1)
	go func() {
		s, err := b.Open(ctx)
		if err == nil {
			err = s.Close(ctx)
		}
		opened <- err
	}()
	for deadline := time.Now().Add(time.Minute); local.WarmPoolWaiting(b) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a minute after an Open found the pool empty, it waits for none of the pool's starts")
		}
	}
	release()
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	most := mostReady(b, 2)
	if most < 2 {
		t.Fatalf("an Open found the pool of 1 empty and waited for its start, and the pool then held at most %d ready: it did not grow", most)
	}
}

// startedBesides lists the sandboxes this process started but those
// named: a pool start writes its state file before its warm-up command
// runs, so a start in flight counts.
func startedBesides(b *local.Backend, ids ...string) []string {
	var out []string
	all, _ := b.List()
	for _, id := range all {
		data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
		var m struct {
			PID int `json:"pid"`
		}
		if slices.Contains(ids, id) || err != nil || json.Unmarshal(data, &m) != nil {
			continue
		}
		if parentOf(m.PID) == os.Getpid() {
			out = append(out, id)
		}
	}
	return out
}

// TestWarmPoolRefillAfterFirstCommand: the refill after a claim waits for
// the claiming session's first command to end (it would otherwise start a
// sandbox beside that command), then fills the pool.
func TestWarmPoolRefillAfterFirstCommand(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	waitPool(t, b, 1)
	s := openSession(t, b)
	ours := func() []string { return startedBesides(b, s.ID()) }
	if got := ours(); len(got) != 0 {
		t.Fatalf("sandboxes %v of this process besides the claimed one, before its first command", got)
	}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustOK(t, s, goruntime.Request{Command: "sleep 0.7"})
	}()
	var during []string
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if during == nil {
				during = ours()
			}
		}
	}
	// The refill waits at most 2 s (poolRefillDelay) for the command.
	if took := time.Since(start); took > 1800*time.Millisecond {
		t.Skipf("the first command took %v, too close to the refill's 2 s bound to tell the two apart", took)
	}
	if len(during) > 0 {
		t.Errorf("pool started %v while the claimed session's first command ran", during)
	}
	waitPool(t, b, 1)
}

// TestWarmPoolFillPausesForFirstCommand: a filler that runs while a
// claimed sandbox's first command runs stops once the pool holds one
// ready sandbox, and fills the rest when that command has ended (a fresh
// process's first call otherwise ran beside two starts). The test holds
// the start slots, so no start ends while it looks, and reads the pool's
// starts and its settling claims in one snapshot: whenever a claim
// settles, the pool has at most one sandbox ready or starting.
func TestWarmPoolFillPausesForFirstCommand(t *testing.T) {
	b := newBackend(t, poolOptions(2))
	waitPool(t, b, 2)
	busy, idle := openSession(t, b), openSession(t, b) // the pool is empty; neither has settled
	release := local.HoldStarts(b)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Runs until cancelled: busy settles by its claim's 2 s bound.
		_, _ = busy.Execute(ctx, goruntime.Request{Command: "sleep 600"})
	}()
	// idle's end (Close's first step) settles it: the filler starts, with
	// busy still settling. The test looks meanwhile: busy settles by its
	// claim's 2 s bound, which a slow Close could outlast.
	closed := make(chan error, 1)
	go func() { closed <- idle.Close(context.Background()) }()
	seen := false
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		ready, starting, settling := local.WarmPoolState(b)
		if settling == 0 {
			break
		}
		if ready+starting > 1 {
			t.Fatalf("while a claimed session settled the pool had %d sandboxes ready and %d starting, want 1 in all (an empty pool refills; a second start waits)", ready, starting)
		}
		seen = seen || starting == 1
		if time.Now().After(deadline) {
			t.Fatal("a claimed session still settles a minute after its claim")
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Skip("the claimed session settled before the test saw the pool's first start")
	}
	// Settled (its 2 s bound, the command still running): the pool fills
	// the rest.
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStarting(b) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the claims settled, %d pool starts under way, want 2", local.WarmPoolStarting(b))
		}
	}
	release()
	cancel()
	<-done
	waitPool(t, b, 2)
}

// TestSpareDisksWaitForFirstCommand: a pool start an Open waits for (a
// fresh process's first Open) does not top up the spare disks when it
// ends: made beside that Open's first command they slowed it by 8 %. The
// pool's next start, once the command has run, tops them up. The pool's
// start is held until the Open waits for it.
func TestSpareDisksWaitForFirstCommand(t *testing.T) {
	localtest.RequireDiskImage(t)
	state := freshState(t)
	opts := poolOptions(1)
	opts.StateDir = state
	b := newBackend(t, opts)
	waitPool(t, b, 1)
	waitSpareDisks(t, state, 2) // the pool's first start, waited for by no Open, made them
	made, release := local.HoldPoolStarts(b)
	t.Cleanup(release) // before the backend's close, which waits for the start
	first, err := goruntime.Open(context.Background(), b, goruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(context.Background()); err != nil { // the pool refills at once
		t.Fatal(err)
	}
	select {
	case <-made:
	case <-time.After(3 * time.Minute):
		t.Fatal("no warm pool start made its cgroup within 3 minutes of a claim")
	}
	left := len(spareDisks(state)) // the held start took one
	opened := make(chan *goruntime.Session, 1)
	go func() { opened <- openSession(t, b) }()
	for deadline := time.Now().Add(time.Minute); local.WarmPoolStartsWaitedFor(b) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a minute after an Open found the pool empty, it waits for none of the pool's starts")
		}
	}
	release()
	s := <-opened
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustOK(t, s, goruntime.Request{Command: "sleep 1"})
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if n := len(spareDisks(state)); n > left {
				t.Fatalf("%d spare disks while the first command of the Open that waited for the start runs, %d before: topped up beside it", n, left)
			}
		}
	}
	waitSpareDisks(t, state, 2)
}
