package rev

import (
	"testing"
	"unicode/utf8"
)

func FuzzReverse(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip()
		}
		if Reverse(Reverse(s)) != s {
			t.Errorf("double reverse of %q changed it", s)
		}
	})
}
