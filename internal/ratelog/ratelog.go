// Package ratelog bounds how much a source of log records can write: a
// slog.Handler that passes the first Burst records of each Interval and
// counts the rest, then writes one summary record for those when the
// interval ends. Records that anyone outside can cause at will (refused
// HTTP requests, refused module fetches) go through one, so a flood of
// them writes at most Burst+1 lines per Interval instead of filling the
// disk that holds the log.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Handler passes at most Burst records per Interval to the handler it
// wraps; see New. Handlers derived with WithAttrs and WithGroup share its
// budget.
type Handler struct {
	next slog.Handler
	st   *state
}

// state is the budget a Handler and its derivations share.
type state struct {
	burst    int
	interval time.Duration

	mu        sync.Mutex
	windowEnd time.Time // the current interval ends here
	passed    int       // records passed in the current interval
	dropped   int       // records suppressed in the current interval
	first     string    // the message of the first one suppressed
	level     slog.Level
	out       slog.Handler // where the summary goes
	timer     *time.Timer  // writes the summary at windowEnd
}

// New returns a Handler passing to next at most burst records in each
// interval (an interval starts with the first record after the last one
// ended); the records past burst are dropped and, when the interval ends,
// summed up in one record at the highest level among them:
// "<first dropped message> (rate-limited)" with attributes suppressed
// (how many) and interval. burst < 1 counts as 1.
func New(next slog.Handler, burst int, interval time.Duration) *Handler {
	return &Handler{next: next, st: &state{burst: max(burst, 1), interval: interval}}
}

// Enabled reports whether the wrapped handler takes records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on while the interval's budget lasts, else counts it.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	st := h.st
	now := time.Now()
	st.mu.Lock()
	if !now.Before(st.windowEnd) {
		summary, out := st.takeSummary()
		st.windowEnd, st.passed = now.Add(st.interval), 0
		if summary != nil {
			st.mu.Unlock()
			_ = out.Handle(context.WithoutCancel(ctx), *summary)
			st.mu.Lock()
		}
	}
	if st.passed < st.burst {
		st.passed++
		st.mu.Unlock()
		return h.next.Handle(ctx, r)
	}
	if st.dropped == 0 {
		st.first, st.level, st.out = r.Message, r.Level, h.next
		st.timer = time.AfterFunc(st.windowEnd.Sub(now), st.flush)
	}
	st.dropped++
	st.level = max(st.level, r.Level)
	st.mu.Unlock()
	return nil
}

// flush writes the summary of the interval that ended, if any.
func (st *state) flush() { st.flushNow(context.Background()) }

// Flush writes the summary of the records suppressed so far in this
// interval now rather than when the interval ends, for a program about to
// stop: a summary still pending when it exits is lost. Records later in
// the same interval are still within its spent budget, and summed up
// again when it ends.
func (h *Handler) Flush(ctx context.Context) { h.st.flushNow(ctx) }

// flushNow writes the pending summary, if any, with ctx.
func (st *state) flushNow(ctx context.Context) {
	st.mu.Lock()
	summary, out := st.takeSummary()
	st.mu.Unlock()
	if summary != nil {
		_ = out.Handle(context.WithoutCancel(ctx), *summary)
	}
}

// takeSummary returns the summary record of the suppressed records and
// resets their count, or nil when none were. st.mu is held.
func (st *state) takeSummary() (*slog.Record, slog.Handler) {
	if st.dropped == 0 {
		return nil, nil
	}
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	r := slog.NewRecord(time.Now(), st.level, st.first+" (rate-limited)", 0)
	r.AddAttrs(slog.Int("suppressed", st.dropped), slog.Duration("interval", st.interval))
	out := st.out
	st.dropped, st.first, st.out = 0, "", nil
	return &r, out
}

// WithAttrs returns a Handler adding attrs, sharing h's budget.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), st: h.st}
}

// WithGroup returns a Handler opening group name, sharing h's budget.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), st: h.st}
}

// The budget of records that outsiders can cause at will (Outside).
const (
	OutsideBurst    = 10
	OutsideInterval = time.Minute
)

// Outside returns a logger writing through next at most OutsideBurst
// records per OutsideInterval (and one summary of the rest): for records
// that requests from outside cause, such as refusals. Each call has a
// budget of its own.
func Outside(next *slog.Logger) *slog.Logger {
	return slog.New(OutsideHandler(next))
}

// OutsideHandler is Outside's handler, for a caller that also Flushes it.
func OutsideHandler(next *slog.Logger) *Handler {
	return New(next.Handler(), OutsideBurst, OutsideInterval)
}
