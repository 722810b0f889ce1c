package seed

import (
	"strings"
	"testing"
)

func TestPackageCounter(t *testing.T) {
	n := 0
	c := &packageCounter{want: map[string]bool{"fmt": true, "os": true}, onPackage: func() { n++ }}
	// Lines split across writes, a package named twice, one not wanted.
	for _, w := range []string{"internal/abi\nf", "mt\nos\nfm", "t\nnet/http\n"} {
		if _, err := c.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if n != 2 {
		t.Errorf("counted %d packages, want 2 (fmt and os once each)", n)
	}
	if !strings.Contains(string(c.tail()), "net/http") {
		t.Errorf("tail lost the output: %q", c.tail())
	}
}
