package mcpserver

import (
	"context"
	"log/slog"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
)

// failedCalls is the log of tool calls that failed (a sandbox that could
// not be opened or attached, a backend error). Any client can make calls
// fail at will, hundreds a second (an unknown sandbox_id, a full
// --max-sandboxes), so the lines go through one bounded budget for the
// whole server (ratelog.Outside's: a burst a minute, then one summary
// line counting the rest), which Close flushes.
type failedCalls struct{ h *ratelog.Handler }

func newFailedCalls(log *slog.Logger) failedCalls {
	return failedCalls{h: ratelog.OutsideHandler(log)}
}

// log writes one failed call of tool, with err and attrs, within the
// budget.
func (f failedCalls) log(ctx context.Context, tool string, err error, attrs ...any) {
	attrs = append([]any{"tool", tool}, attrs...)
	slog.New(f.h).WarnContext(ctx, "tool call failed", append(attrs, "err", err)...)
}

// flush writes the summary of the lines suppressed so far, which would
// otherwise be lost when the process stops within the interval.
func (f failedCalls) flush(ctx context.Context) { f.h.Flush(ctx) }
