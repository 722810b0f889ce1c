package optionflag

import "testing"

// TestText: each backend's Options fields become its own flags ("WarmPool"
// is a count for one and a pool's name for the other); fields it has no
// flag for stay as they are.
func TestText(t *testing.T) {
	for _, tc := range []struct {
		in           string
		agentSandbox bool
		want         string
	}{
		{"raise Options.MemoryBytes or set local.Options.Relax.DiskQuota", false, "raise --memory-mb or set --relax=disk"},
		{"Options.WarmPool", false, "--local-warm-pool-size"},
		{"(Options.WarmPool) or set Options.Connectivity=in-cluster-pod-ip", true, "(--warm-pool-name) or set --connectivity=in-cluster-pod-ip"},
		{"Options.NoSuchField stays", false, "Options.NoSuchField stays"},
	} {
		if got := Text(tc.in, tc.agentSandbox); got != tc.want {
			t.Errorf("Text(%q, %v) = %q, want %q", tc.in, tc.agentSandbox, got, tc.want)
		}
	}
}
