package sessions

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Progress reports a running call to its client every interval: send
// gets the time since the start and the latest message (what the call
// waits for, or the last line of the command's output). A nil *Progress
// does nothing: a front end makes one only for a client that asked.
type Progress struct {
	mu      sync.Mutex
	message string
	stopped chan struct{}
	done    sync.WaitGroup
}

// StartProgress calls send every interval until Stop or ctx is done.
func StartProgress(ctx context.Context, interval time.Duration, send func(elapsed time.Duration, message string)) *Progress {
	p := &Progress{stopped: make(chan struct{})}
	start := time.Now()
	p.done.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stopped:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.mu.Lock()
				msg := p.message
				p.mu.Unlock()
				send(time.Since(start), msg)
			}
		}
	})
	return p
}

// Say sets the message of the next report.
func (p *Progress) Say(msg string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.message = msg
	p.mu.Unlock()
}

// Listener returns Say as a function for Call.Announce, or nil for a nil
// *Progress: nil is what says nobody listens (a method value of a nil
// pointer is a function that is not nil).
func (p *Progress) Listener() func(string) {
	if p == nil {
		return nil
	}
	return p.Say
}

// Chunk makes the last non-empty line of a piece of output, with its
// stream, the message of the next report.
func (p *Progress) Chunk(c goruntime.Chunk) {
	text := strings.TrimRight(string(c.Data), "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	if text = strings.TrimSpace(text); text == "" {
		return
	}
	p.Say(string(c.Stream) + ": " + clip.String(text, 200))
}

// Stop ends the reports and waits for the one being sent.
func (p *Progress) Stop() {
	if p == nil {
		return
	}
	close(p.stopped)
	p.done.Wait()
}
