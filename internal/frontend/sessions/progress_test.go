package sessions

import (
	"context"
	"testing"
	"time"
)

// TestProgressListener: a nil *Progress (a call whose client asked for no
// progress) gives Call.Announce no listener at all, so Pool.Do does no
// work for reports nobody reads; a running one's listener sets the
// message of its next report.
func TestProgressListener(t *testing.T) {
	var none *Progress
	if none.Listener() != nil {
		t.Fatal("a nil *Progress's listener is not nil: Pool.Do would announce to nobody")
	}

	msgs := make(chan string, 16)
	p := StartProgress(context.Background(), time.Millisecond, func(_ time.Duration, msg string) {
		select {
		case msgs <- msg:
		default:
		}
	})
	defer p.Stop()
	say := p.Listener()
	if say == nil {
		t.Fatal("a running Progress has no listener")
	}
	say("starting a sandbox")
	deadline := time.After(time.Minute)
	for {
		select {
		case m := <-msgs:
			if m == "starting a sandbox" {
				return
			}
		case <-deadline:
			t.Fatal("the listener's message was never reported")
		}
	}
}
