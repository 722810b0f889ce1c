// Package bench measures go-runtime-sandbox side by side with its
// baselines on one machine and prints a table of ratios: the runtime
// server against a bare fork+exec, upstream agent-sandbox's Python runtime
// and upstream's sandboxd daemon; the local backend's open, first and warm
// runs and concurrent sandboxes against the bare host; an MCP call against
// a library call and the bare host; a sandboxed CPU-bound program's CPU
// against the caller's own on a busy machine; on request (it needs root) the local
// backend run by another user against the same as root. cmd/bench is its
// command line and docs/benchmarks.md shows the last table.
//
// Every figure is a ratio of two things measured in the same run,
// interleaved where they can be, so a busy machine weighs on both alike.
package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of the report: a figure of ours, the baseline it is
// compared with, their ratio and the target the ratio should meet.
type Row struct {
	Section  string  // the section that measured it: "server", "local", …
	Figure   string  // what is measured
	Ours     string  // our value, with its unit
	Baseline string  // what we compare with and its value; "" when none
	Ratio    float64 // Ours/Baseline in the figure's unit (lower is better); NaN when none
	// Target is the bound Ratio (for a Speedup row, baseline/ours) must
	// meet: "<= 1.5", ">= 3"; "" when the row is informational.
	Target string
	// Speedup prints the ratio as baseline/ours ("4.2x faster") instead.
	Speedup bool
	// OK reports whether the target was met; meaningless without Target.
	OK bool
}

// ratioText formats the row's ratio for the table.
func (r Row) ratioText() string {
	switch {
	case math.IsNaN(r.Ratio) || r.Ratio == 0:
		return "-"
	case r.Speedup:
		return fmt.Sprintf("%.1fx faster", 1/r.Ratio)
	}
	return fmt.Sprintf("%.2f", r.Ratio)
}

func (r Row) verdict() string {
	switch {
	case r.Target == "":
		return ""
	case r.OK:
		return "ok"
	}
	return "MISSED"
}

// Report is one run's machine description and rows.
type Report struct {
	Machine Machine
	Started time.Time
	Elapsed time.Duration
	Rows    []Row
	// Notes are lines printed under the table (skipped sections and why).
	Notes []string
}

// Missed returns the rows whose target was not met.
func (r *Report) Missed() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Target != "" && !row.OK {
			out = append(out, row)
		}
	}
	return out
}

// Print writes the report as a Markdown table with the machine above it,
// the form docs/benchmarks.md shows.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "go-runtime-sandbox benchmark, %s (took %s)\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second))
	r.Machine.print(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| figure\t ours\t baseline\t ratio\t target\t \t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t")
	for _, row := range r.Rows {
		base := row.Baseline
		if base == "" {
			base = "-"
		}
		fmt.Fprintf(tw, "| %s: %s\t %s\t %s\t %s\t %s\t %s\t\n", row.Section, row.Figure, row.Ours, base, row.ratioText(), row.Target, row.verdict())
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n%s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

// check fills row.OK from its Target, which bounds Ratio (or, for a
// speedup row, baseline/ours).
func check(row Row) Row {
	if row.Target == "" || math.IsNaN(row.Ratio) || row.Ratio == 0 {
		return row
	}
	v := row.Ratio
	if row.Speedup {
		v = 1 / row.Ratio
	}
	op, num, _ := strings.Cut(row.Target, " ")
	var bound float64
	if _, err := fmt.Sscanf(strings.TrimSuffix(num, "x"), "%g", &bound); err != nil {
		return row
	}
	switch op {
	case "<=":
		row.OK = v <= bound
	case ">=":
		row.OK = v >= bound
	}
	return row
}

// durations collects samples of one measured thing.
type durations []time.Duration

// p50 is the median sample (the lower one of an even count); 0 when empty.
func (d durations) p50() time.Duration { return d.pct(50) }

// pct is the p-th percentile by the nearest-rank method.
func (d durations) pct(p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return s[i-1]
}

// ms formats a duration in milliseconds with sensible precision.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f ms", f)
	case f < 100:
		return fmt.Sprintf("%.1f ms", f)
	}
	return fmt.Sprintf("%.0f ms", f)
}

// ratio divides two durations; NaN when the baseline is zero.
func ratio(ours, base time.Duration) float64 {
	if base <= 0 {
		return math.NaN()
	}
	return float64(ours) / float64(base)
}
