package goruntime

import (
	"context"
	"fmt"
	"time"
)

// Progress reports on a long step of opening a sandbox or preparing a
// backend: the local backend's one-time seed build cache (about a minute
// on a fresh machine), or waiting for another process that builds it.
// Backends send it to the function Options.Progress (or WithProgress)
// installed: a step that is waited for every few seconds and whenever
// Done changes (the local backend's Prepare), one that is not waited for
// once (its Open, which starts its sandbox without the seed meanwhile).
type Progress struct {
	// Stage names the step in a word or two ("seed build cache").
	Stage string
	// Message says what is happening now, for people ("compiling the
	// standard library for go build").
	Message string
	// Done and Total count the step's units of work (packages compiled);
	// Total is 0 when unknown.
	Done, Total int
	// Step and Steps number the step's phases (step 2 of 4); Steps is 0
	// when the step has none.
	Step, Steps int
	// Elapsed is the time since the step began.
	Elapsed time.Duration
}

// String renders p in one line: "seed build cache: compiling the standard
// library (step 2/4, 120/260 packages, 34s)".
func (p Progress) String() string {
	var detail []byte
	add := func(format string, args ...any) {
		if len(detail) > 0 {
			detail = append(detail, ", "...)
		}
		detail = fmt.Appendf(detail, format, args...)
	}
	if p.Steps > 0 {
		add("step %d/%d", p.Step, p.Steps)
	}
	if p.Total > 0 {
		add("%d/%d packages", p.Done, p.Total)
	}
	add("%s", p.Elapsed.Round(time.Second))
	return fmt.Sprintf("%s: %s (%s)", p.Stage, p.Message, detail)
}

type progressKey struct{}

// WithProgress returns a context whose long steps (a backend's Open,
// Prepare) report to fn. fn is called from the backend's goroutines, one
// call at a time per operation; it must not block.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress sends p to the function WithProgress installed in ctx, if
// any. Backends call it.
func ReportProgress(ctx context.Context, p Progress) {
	if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok {
		fn(p)
	}
}

// HasProgress reports whether ctx carries a progress function, so that a
// backend can skip work done only for reports.
func HasProgress(ctx context.Context) bool {
	_, ok := ctx.Value(progressKey{}).(func(Progress))
	return ok
}
