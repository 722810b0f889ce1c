package metricfamily

import (
	"strings"
	"testing"
	"time"
)

// TestWrite: HELP and TYPE lines above the family's own series only, with
// labels in name order and histograms in Prometheus' le buckets.
func TestWrite(t *testing.T) {
	c := New("x_total", "Things.", "counter")
	c.Set.GetOrCreateCounter(c.Sample("tool", "a", "outcome", "ok")).Add(2)
	h := New("x_seconds", "Time.", "histogram")
	h.Set.GetOrCreatePrometheusHistogramExt(h.Sample("tool", "a"), []float64{1, 10}).UpdateDuration(time.Now())
	var b strings.Builder
	c.Write(&b)
	h.Write(&b)
	for _, want := range []string{
		"# HELP x_total Things.\n# TYPE x_total counter\nx_total{outcome=\"ok\",tool=\"a\"} 2\n# HELP x_seconds",
		"x_seconds_bucket{tool=\"a\",le=\"1\"} 1\n",
		"x_seconds_count{tool=\"a\"} 1\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if got := New("g", "", "gauge").Sample(); got != "g" {
		t.Errorf("Sample() = %q, want g", got)
	}
}
