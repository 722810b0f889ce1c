package goruntime

import (
	"context"
	"testing"
	"time"
)

func TestProgressString(t *testing.T) {
	p := Progress{Stage: "seed build cache", Message: "compiling", Step: 2, Steps: 4, Done: 120, Total: 260, Elapsed: 34*time.Second + 400*time.Millisecond}
	if got, want := p.String(), "seed build cache: compiling (step 2/4, 120/260 packages, 34s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	p = Progress{Stage: "seed build cache", Message: "waiting", Elapsed: 3 * time.Second}
	if got, want := p.String(), "seed build cache: waiting (3s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestWithProgress(t *testing.T) {
	ctx := context.Background()
	if HasProgress(ctx) || HasProgress(WithProgress(ctx, nil)) {
		t.Fatal("a context without a progress function claims one")
	}
	ReportProgress(ctx, Progress{Stage: "x"}) // no function: nothing happens
	var got []Progress
	pctx := WithProgress(ctx, func(p Progress) { got = append(got, p) })
	if !HasProgress(pctx) {
		t.Fatal("HasProgress = false after WithProgress")
	}
	ReportProgress(pctx, Progress{Stage: "a"})
	ReportProgress(pctx, Progress{Stage: "b"})
	if len(got) != 2 || got[0].Stage != "a" || got[1].Stage != "b" {
		t.Errorf("reports = %+v", got)
	}
}

// TestOpenPassesProgress checks that Options.Progress reaches the
// backend's Open through its context.
func TestOpenPassesProgress(t *testing.T) {
	var got []Progress
	b := progressBackend{}
	s, err := Open(context.Background(), b, Options{Progress: func(p Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	_ = s
	if len(got) != 1 || got[0].Message != "opening" {
		t.Errorf("reports = %+v, want the backend's one", got)
	}
}

// progressBackend reports one progress from Open and fails Attach.
type progressBackend struct{ Backend }

func (progressBackend) Name() string { return "progress" }

func (progressBackend) Open(ctx context.Context) (Sandbox, error) {
	ReportProgress(ctx, Progress{Stage: "test", Message: "opening"})
	return nil, nil
}
