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

// TestWordRoundTripsThroughSh: Word's result reads back as exactly its
// input, and is left unquoted only where nothing in it needs quoting.
func TestWordRoundTripsThroughSh(t *testing.T) {
	for s, plain := range map[string]bool{"/usr/local/bin/sandbox-check": true, "--setup-user=alice": true, "a.b_c+d": true,
		"": false, "a b": false, "it's": false, "$HOME": false, "*": false, "~x": false, "a;b": false, "ü": false} {
		w := Word(s)
		if (w == s) != plain {
			t.Errorf("Word(%q) = %q; left plain: %v, want %v", s, w, w == s, plain)
		}
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+w).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh read Word(%q) = %s back as %q (%v)", s, w, out, err)
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
