package mcpserver

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// forwardOpening passes message() to announce every openingPoll until the
// returned stop is called, whenever it is not empty.
func forwardOpening(message func() string, announce func(string)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(openingPoll)
		defer t.Stop()
		for {
			if m := message(); m != "" {
				announce(m)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// openingPoll is how often a call waiting behind an open picks up its
// progress.
const openingPoll = 250 * time.Millisecond

// progress sends notifications/progress for one run_go_code call while its
// command runs, when the client gave a progress token: every
// Config.ProgressInterval, with the elapsed seconds as progress, the
// timeout as total and the latest output line as message.
type progress struct {
	on      bool // the client asked for progress
	mu      sync.Mutex
	message string
	stopped chan struct{}
	done    sync.WaitGroup
}

func (s *Server) startProgress(ctx context.Context, req *mcp.CallToolRequest, timeout time.Duration) *progress {
	p := &progress{stopped: make(chan struct{})}
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	if token == nil || req.Session == nil {
		return p
	}
	p.on = true
	start := time.Now()
	send := func() {
		p.mu.Lock()
		msg := p.message
		p.mu.Unlock()
		elapsed := time.Since(start).Seconds()
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      math.Round(elapsed*10) / 10,
			Total:         timeout.Seconds(),
			Message:       msg,
		})
		if err != nil {
			s.log.Debug("progress notification", "err", err)
		}
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stopped:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				send()
			}
		}
	}()
	return p
}

// active reports whether notifications are being sent.
func (p *progress) active() bool { return p.on }

// say sets the message of the next notification.
func (p *progress) say(msg string) {
	p.mu.Lock()
	p.message = msg
	p.mu.Unlock()
}

// chunk notes the last non-empty line of output as the next message.
func (p *progress) chunk(c goruntime.Chunk) {
	text := strings.TrimRight(string(c.Data), "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	if text = strings.TrimSpace(text); text == "" {
		return
	}
	p.say(string(c.Stream) + ": " + clip.String(text, 200))
}

func (p *progress) stop() {
	close(p.stopped)
	p.done.Wait()
}
