package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// slowFirst answers every step of the smoke flow as it passes; its first
// step takes a while, as the first build on a new machine does.
type slowFirst struct {
	calls int
	slow  time.Duration
}

func (f *slowFirst) ExecuteStream(ctx context.Context, req goruntime.Request, _ func(goruntime.Chunk)) (*goruntime.Result, error) {
	f.calls++
	if f.calls == 1 {
		time.Sleep(f.slow)
	}
	return &goruntime.Result{Stdout: "sum(1..100)=5050 go=go1.26\n", Outcome: goruntime.OutcomeOK}, nil
}

// TestStillRunning: a step that takes longer than Options.Still says it
// still runs, before its result; quick steps say nothing of the kind.
func TestStillRunning(t *testing.T) {
	var out strings.Builder
	ex := &slowFirst{slow: 500 * time.Millisecond}
	if err := Run(context.Background(), ex, FlowSmoke, Options{Out: &out, Still: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	still := strings.Index(text, "   still running `go run main.go`: ")
	result := strings.Index(text, "-- go run main.go [exit=0] --")
	if still < 0 || result < still {
		t.Fatalf("the slow step did not say it still runs before its result:\n%s", text)
	}
	if n := strings.Count(text, "still running"); n < 2 || strings.Contains(text, "still running `go build") || strings.Contains(text, "still running `./app") {
		t.Errorf("%d still-running lines, want a few, all of the slow step's:\n%s", n, text)
	}
}
