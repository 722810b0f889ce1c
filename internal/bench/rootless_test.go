package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func TestAlternatedReversesEveryOtherRound(t *testing.T) {
	var order []string
	step := func(name string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			order = append(order, name)
			return time.Duration(len(order)), nil
		}
	}
	s, err := alternated(3, step("a"), step("b"), step("c"))
	if err != nil {
		t.Fatal(err)
	}
	// The warm-up round (-1) is odd, so reversed, and not counted.
	want := []string{"c", "b", "a", "a", "b", "c", "c", "b", "a", "a", "b", "c"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if len(s) != 3 || len(s[0]) != 3 || s[0][0] != 4 || s[0][1] != 9 || s[2][1] != 7 {
		t.Errorf("samples %v: want each step's own, warm-up left out", s)
	}
	if _, err := alternated(2, step("a"), func() (time.Duration, error) { return 0, errors.New("boom") }); err == nil {
		t.Error("a failing step did not fail the rounds")
	}
}

func TestRelaxIfUnavailable(t *testing.T) {
	ps := []local.Protection{
		{Name: local.ProtNamespaces, Status: local.StatusActive, Required: true},
		{Name: local.ProtDiskQuota, Status: local.StatusUnavailable, Required: true, Detail: "needs root", Fix: "run as root"},
		{Name: local.ProtHostUID, Status: local.StatusNotApplicable},
	}
	if !relaxIfUnavailable(ps, local.ProtDiskQuota) {
		t.Fatal("an unavailable disk quota was not relaxed")
	}
	if p := ps[1]; p.Status != local.StatusRelaxed || p.Required || p.Fix != "" || !strings.Contains(p.Detail, "needs root") {
		t.Errorf("relaxed protection %+v: want relaxed, not required, the reason kept", p)
	}
	ps[1].Status = local.StatusActive
	if relaxIfUnavailable(ps, local.ProtDiskQuota) {
		t.Error("an active disk quota was relaxed")
	}
	ps[1].Status = local.StatusRelaxed
	if got, want := protectionsText(ps), "1 of 3 active (disk-quota relaxed, host-uid not applicable)"; got != want {
		t.Errorf("protectionsText = %q, want %q", got, want)
	}
}

// fakeSide records what serveSide asked of it.
type fakeSide struct {
	calls  []string
	closed bool
}

func (f *fakeSide) setup(_ context.Context, s sideSetup) (*sideHello, error) {
	f.calls = append(f.calls, "setup "+s.StateDir)
	return &sideHello{UID: 65532, EUID: 65532}, nil
}
func (f *fakeSide) settle() { f.calls = append(f.calls, "settle") }
func (f *fakeSide) open(_ context.Context, pool bool) (time.Duration, error) {
	f.calls = append(f.calls, fmt.Sprint("open ", pool))
	return time.Millisecond, nil
}
func (f *fakeSide) first(_ context.Context, c string, code int) (time.Duration, error) {
	f.calls = append(f.calls, fmt.Sprint("first ", c, " ", code))
	return 0, errors.New("exit 1")
}
func (f *fakeSide) warm(_ context.Context, c string, code int) (time.Duration, error) {
	f.calls = append(f.calls, fmt.Sprint("warm ", c, " ", code))
	return 2 * time.Second, nil
}
func (f *fakeSide) snapshots(context.Context, int) ([]Row, error) {
	f.calls = append(f.calls, "snapshots")
	return nil, nil
}
func (f *fakeSide) close(context.Context) error { f.closed = true; return nil }

func TestServeSide(t *testing.T) {
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, req := range []sideRequest{
		{Op: opSetup, Setup: &sideSetup{StateDir: "/state", Rootless: true}},
		{Op: opSettle},
		{Op: opOpen, Pool: true},
		{Op: opFirst, Command: "go run .", Code: 7},
		{Op: opWarm, Command: "go build -o app .", Code: 8},
		{Op: "dance"},
		{Op: opSetup},
	} {
		if err := enc.Encode(req); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	f := &fakeSide{}
	if code := serveSide(context.Background(), &in, &out, f); code != 0 {
		t.Fatalf("serveSide exited %d", code)
	}
	want := []string{"setup /state", "settle", "open true", "first go run . 7", "warm go build -o app . 8"}
	if !slices.Equal(f.calls, want) || !f.closed {
		t.Errorf("calls %q, closed %v; want %q, closed at the end of input", f.calls, f.closed, want)
	}
	dec := json.NewDecoder(&out)
	var reps []sideReply
	for dec.More() {
		var rep sideReply
		if err := dec.Decode(&rep); err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	if len(reps) != 7 {
		t.Fatalf("%d replies, want one per request: %+v", len(reps), reps)
	}
	if h := reps[0].Hello; h == nil || h.EUID != 65532 {
		t.Errorf("setup reply %+v: want the hello", reps[0])
	}
	if reps[2].Took != time.Millisecond || reps[4].Took != 2*time.Second {
		t.Errorf("timed replies %+v, %+v: want the durations", reps[2], reps[4])
	}
	for i, want := range map[int]string{3: "exit 1", 5: `unknown request "dance"`, 6: "setup without its settings"} {
		if !strings.Contains(reps[i].Err, want) {
			t.Errorf("reply %d: %+v, want an error mentioning %q", i, reps[i], want)
		}
	}
}

// TestRootlessSkipsWithoutRoot: without root the section is a note, not
// an error (as root, make unit skips this test; the section itself is run
// by hand: docs/benchmarks.md).
func TestRootlessSkipsWithoutRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root: the section would run")
	}
	r := &runner{cfg: Defaults(), report: &Report{}}
	if err := r.rootlessSection(context.Background()); err != nil {
		t.Fatalf("rootless section without root: %v", err)
	}
	if len(r.report.Rows) != 0 || len(r.report.Notes) != 1 || !strings.Contains(r.report.Notes[0], "rootless section skipped: it needs root") {
		t.Errorf("rows %v, notes %q: want one note saying it needs root", r.report.Rows, r.report.Notes)
	}
}
