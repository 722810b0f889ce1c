package shell

import (
	"os/exec"
	"testing"
)

func TestQuoteRoundTripsThroughSh(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", "'", `a"b\c$d` + "`e`", "new\nline", "  spaces  ", "*", "ü"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh with %q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("sh read back %q, want %q", out, s)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "a_b9": true, "PATH": true,
		"": false, "9A": false, "A-B": false, "A=B": false, "A B": false, "ü": false, "A.B": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestEnvironKey(t *testing.T) {
	for name, want := range map[string]bool{"A": true, "9-x.y": true, "": false, "A=B": false, "A\x00": false} {
		if got := EnvironKey(name); got != want {
			t.Errorf("EnvironKey(%q) = %v, want %v", name, got, want)
		}
	}
}
