package cgroups

import "testing"

// TestNiceWeight: the kernel's weights of nice values (sched_prio_to_weight)
// and their cgroup forms: v1 cpu.shares as they are (within 2 to
// MaxWeight), v2 cpu.weight scaled to 100 for nice 0 as the kernel's
// cpu.weight.nice does.
func TestNiceWeight(t *testing.T) {
	for _, c := range []struct {
		nice, weight int
		v1, v2       string
	}{
		{0, 1024, "1024", "100"},
		{1, 820, "820", "80"},
		{5, 335, "335", "33"},
		{10, 110, "110", "11"},
		{19, 15, "15", "1"},
		{25, 15, "15", "1"}, // clamped to 19
		{-5, 3121, "3121", "305"},
		{-20, 88761, "88761", "8668"},
		{-40, 88761, "88761", "8668"}, // clamped to -20
	} {
		w := NiceWeight(c.nice)
		if w != c.weight {
			t.Errorf("NiceWeight(%d) = %d, want %d", c.nice, w, c.weight)
		}
		if v1, v2 := groupWeight(false, w), groupWeight(true, w); v1 != c.v1 || v2 != c.v2 {
			t.Errorf("nice %d: group weight v1 %s, v2 %s; want %s, %s", c.nice, v1, v2, c.v1, c.v2)
		}
	}
	if v1, v2 := groupWeight(false, 1), groupWeight(true, MaxWeight); v1 != "2" || v2 != "10000" {
		t.Errorf("group weight of 1 on v1 = %s (want 2), of MaxWeight on v2 = %s (want 10000)", v1, v2)
	}
	for i := -20; i < 19; i++ {
		if NiceWeight(i) <= NiceWeight(i+1) {
			t.Errorf("nice %d weighs %d, not more than nice %d's %d", i, NiceWeight(i), i+1, NiceWeight(i+1))
		}
	}
}

func TestParseAutogroup(t *testing.T) {
	if n, err := parseAutogroup("/autogroup-4 nice 5\n"); err != nil || n != 5 {
		t.Errorf("parseAutogroup = %d, %v; want 5", n, err)
	}
	if _, err := parseAutogroup("garbage"); err == nil {
		t.Error("parseAutogroup of garbage: no error")
	}
}
