package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// capture records what reaches it and signals each record on got.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
	got  chan struct{}
}

func newCapture() *capture { return &capture{got: make(chan struct{}, 1<<16)} }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	c.got <- struct{}{}
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

func (c *capture) records() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]slog.Record(nil), c.recs...)
}

// waitFor waits until n records have reached c (the test's own deadline
// ends a wait that never ends).
func (c *capture) waitFor(t *testing.T, n int) {
	t.Helper()
	for len(c.records()) < n {
		<-c.got
	}
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestBurstThenSummary: of 1000 records in one interval the first 3 pass,
// and when the interval ends one summary record says 997 were suppressed,
// at the highest level among them, naming the first one's message; the
// next interval passes records again. Loggers derived with With share the
// budget.
func TestBurstThenSummary(t *testing.T) {
	c := newCapture()
	log := slog.New(New(c, 3, 200*time.Millisecond))
	derived := log.With("module", "example.com/x")
	for i := range 1000 {
		l := log
		if i%2 == 1 {
			l = derived
		}
		level := slog.LevelInfo
		if i == 500 {
			level = slog.LevelWarn
		}
		l.Log(context.Background(), level, "module proxy: refused", "i", i)
	}
	if n := len(c.records()); n != 3 {
		t.Fatalf("%d records passed in the first interval; want 3", n)
	}
	c.waitFor(t, 4)
	sum := c.records()[3]
	if sum.Message != "module proxy: refused (rate-limited)" || attr(sum, "suppressed").Int64() != 997 || sum.Level != slog.LevelWarn {
		t.Errorf("summary: %q level %v suppressed %v; want the first message (rate-limited), Warn, 997", sum.Message, sum.Level, attr(sum, "suppressed"))
	}
	log.Info("after")
	if recs := c.records(); len(recs) != 5 || recs[4].Message != "after" {
		t.Errorf("a record after the interval: %d records, last %q; want it passed", len(recs), recs[len(recs)-1].Message)
	}
}

// TestFloodOutputBounded: 100,000 refusals written through a text
// handler with a burst of 10 per minute take 10 lines, not 100,000 (the
// module proxy wrote 725 KB for 995 requests in 10 s).
func TestFloodOutputBounded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewTextHandler(&buf, nil), 10, time.Minute))
	for i := range 100_000 {
		log.Info("module proxy: refused", "module", "example.com/m", "i", i)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 10 || buf.Len() > 4096 {
		t.Errorf("100000 records wrote %d lines, %d bytes; want 10 lines", lines, buf.Len())
	}
}

// TestQuietSourceNoSummary: records within the burst pass and no summary
// follows.
func TestQuietSourceNoSummary(t *testing.T) {
	c := newCapture()
	h := New(c, 5, 50*time.Millisecond)
	log := slog.New(h)
	for range 5 {
		log.Info("refused")
	}
	h.st.mu.Lock()
	pending := h.st.timer != nil || h.st.dropped != 0
	h.st.mu.Unlock()
	if n := len(c.records()); n != 5 || pending {
		t.Errorf("%d records passed, summary pending %v; want 5 and none", n, pending)
	}
}

// TestFlushWritesPendingSummary: a program stopping before the interval
// ends gets its summary from Flush at once (no wait for the interval),
// once: the interval's end then has nothing left to sum up.
func TestFlushWritesPendingSummary(t *testing.T) {
	c := newCapture()
	h := New(c, 2, time.Hour)
	log := slog.New(h)
	for range 50 {
		log.Warn("tool call failed")
	}
	h.Flush(context.Background())
	recs := c.records()
	if len(recs) != 3 {
		t.Fatalf("%d records after Flush; want the 2 passed and one summary", len(recs))
	}
	if sum := recs[2]; sum.Message != "tool call failed (rate-limited)" || attr(sum, "suppressed").Int64() != 48 {
		t.Errorf("summary: %q suppressed %v; want 48", sum.Message, attr(sum, "suppressed"))
	}
	h.st.mu.Lock()
	pending := h.st.timer != nil || h.st.dropped != 0
	h.st.mu.Unlock()
	if pending {
		t.Error("a summary is still pending after Flush")
	}
	h.Flush(context.Background())
	if n := len(c.records()); n != 3 {
		t.Errorf("a second Flush wrote %d more records; want none", n-3)
	}
}
