package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckTargets(t *testing.T) {
	cases := []struct {
		row  Row
		want bool
	}{
		{Row{Ratio: 1.4, Target: "<= 1.5"}, true},
		{Row{Ratio: 1.6, Target: "<= 1.5"}, false},
		{Row{Ratio: 0.25, Target: ">= 3x", Speedup: true}, true}, // 4x faster
		{Row{Ratio: 0.5, Target: ">= 3x", Speedup: true}, false}, // 2x faster
		{Row{Ratio: math.NaN(), Target: "<= 1.5"}, false},
	}
	for _, c := range cases {
		if got := check(c.row).OK; got != c.want {
			t.Errorf("check(%+v).OK = %v, want %v", c.row, got, c.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var d durations
	for i := 10; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := d.p50(); got != 5*time.Millisecond {
		t.Errorf("p50 = %v, want 5ms", got)
	}
	if got := d.pct(90); got != 9*time.Millisecond {
		t.Errorf("p90 = %v, want 9ms", got)
	}
	if d[0] != 10*time.Millisecond {
		t.Error("pct sorted the caller's samples")
	}
	if got := (durations{}).p50(); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestPrintMarksMissedTargets(t *testing.T) {
	rep := &Report{Started: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Elapsed: time.Minute,
		Machine: Machine{CPU: "Test CPU", CPUs: 2, MemoryGB: 24, Kernel: "6.18", Cgroup: "v1"}}
	rep.Rows = []Row{
		check(Row{Section: "server", Figure: "/execute", Ours: "1.00 ms", Baseline: "bare: 0.80 ms", Ratio: 1.25, Target: "<= 1.5"}),
		check(Row{Section: "server", Figure: "/execute", Ours: "1.00 ms", Baseline: "python: 2.00 ms", Ratio: 0.5, Target: ">= 3x", Speedup: true}),
		check(Row{Section: "local", Figure: "8 at once", Ours: "2 s", Ratio: math.NaN()}),
	}
	rep.Notes = []string{"note: sandboxd skipped"}
	var out strings.Builder
	rep.Print(&out)
	s := out.String()
	for _, want := range []string{"Test CPU, 2 CPUs, 24 GiB, Linux 6.18 (cgroup v1)", "| server: /execute", "1.25", "2.0x faster", "MISSED", "note: sandboxd skipped"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if got := len(rep.Missed()); got != 1 {
		t.Errorf("Missed() = %d rows, want 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Sections = []string{"disk"} }, `unknown section "disk"`},
		{func(c *Config) { c.Sections = nil }, "at least one section"},
		{func(c *Config) { c.Rounds = 0 }, "--rounds=0"},
		{func(c *Config) { c.Baselines = []string{"node"} }, `unknown baseline "node"`},
	} {
		cfg := Defaults()
		c.mut(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate: %v, want an error mentioning %q", err, c.want)
		}
	}
	cfg := Defaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
