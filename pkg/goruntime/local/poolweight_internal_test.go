package local

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
)

// TestPoolStartWeights: the weight rule of the warm pool's starts over
// fake cgroup v1 directories. A start no Open waits for keeps the low
// weight (made at it); one an Open waits for has the full weight, made
// before or after the Open began waiting, and the low weight again once
// it no longer waits; two Opens wait for two starts, one each; an Open
// whose start ended waits for another under way (its weight full) until
// it takes a sandbox, and one that found no start under way waits for
// the next begun.
func TestPoolStartWeights(t *testing.T) {
	p := &warmPool{b: &Backend{opts: Options{CPUs: 2, Logger: slog.New(slog.DiscardHandler)}}}
	const low, full = "64", "2048" // cpu.shares: a sixteenth of one task; 2 CPUs
	newStart := func(name string) (*poolStart, func() string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(low), 0o644); err != nil { // as cgroups.New makes it
			t.Fatal(err)
		}
		ps := p.began()
		p.made(ps, &cgroups.Cgroup{CPU: dir})
		return ps, func() string {
			data, err := os.ReadFile(filepath.Join(dir, "cpu.shares"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(data))
		}
	}
	want := func(what string, weight func() string, w string) {
		t.Helper()
		if got := weight(); got != w {
			t.Errorf("%s: cpu.shares %s, want %s", what, got, w)
		}
	}

	a, weightA := newStart("a")
	want("a start no Open waits for", weightA, low)
	doneA := p.waitFor()
	want("a start an Open waits for", weightA, full)
	doneA()
	want("a start an Open gave up on", weightA, low)

	// Two Opens, two starts: one each, the second start made while
	// its Open already waited.
	done1 := p.waitFor()
	done2 := p.waitFor()
	want("the first start, two Opens waiting", weightA, full)
	b, weightB := newStart("b")
	want("a start made while an Open waited for no other", weightB, full)

	// a's sandbox joins the pool; the Open that waited for it (or the
	// other) takes it: until then, its Open weighs b, which the other
	// waits for as well.
	p.ended(a)
	want("the start left, both Opens waiting", weightB, full)
	done1()
	want("the start one Open still waits for", weightB, full)
	done2()
	want("a start no Open waits for any more", weightB, low)

	// An Open that waits while no start is registered weighs the next.
	p.ended(b)
	done3 := p.waitFor()
	_, weightC := newStart("c")
	want("a start begun while an Open waited for none", weightC, full)
	done3()
	want("a start no Open waits for any more", weightC, low)
	if len(p.waiters) != 0 || len(p.starting) != 1 {
		t.Errorf("%d waiters and %d starts left, want 0 and 1 (c)", len(p.waiters), len(p.starting))
	}
}
