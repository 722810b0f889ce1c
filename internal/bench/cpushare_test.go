package bench

import (
	"math"
	"testing"
)

func TestSpinShare(t *testing.T) {
	share, err := spinShare("1500000000 5000000000 1\n")
	if err != nil || math.Abs(share-0.3) > 1e-9 {
		t.Errorf("spinShare = %v, %v; want 0.3", share, err)
	}
	for _, bad := range []string{"", "1 2", "x 5000000000 1", "1 0 1"} {
		if _, err := spinShare(bad); err == nil {
			t.Errorf("spinShare(%q): no error", bad)
		}
	}
	v := cpuVariant{shares: [2][]float64{{0.2, 0.4}, {0.3, 0.3}}}
	if r := v.ratio(); math.Abs(r-1) > 1e-9 {
		t.Errorf("ratio of 0.6 CPU over 0.6 CPU = %v, want 1", r)
	}
}
