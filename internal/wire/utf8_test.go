package wire

import (
	"encoding/json"
	"testing"
)

// TestValidUTF8MatchesJSON: ValidUTF8 replaces invalid bytes as
// encoding/json does, one U+FFFD per byte (strings.ToValidUTF8 would
// give one per run).
func TestValidUTF8MatchesJSON(t *testing.T) {
	for _, s := range []string{"plain", "ünï", "a\xff\xfeb", "\xe6\x97", "x\xc3(", ""} {
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON string
		if err := json.Unmarshal(raw, &viaJSON); err != nil {
			t.Fatal(err)
		}
		if got := ValidUTF8(s); got != viaJSON {
			t.Errorf("ValidUTF8(%q) = %q, encoding/json gives %q", s, got, viaJSON)
		}
	}
	if got := ValidUTF8("a\xff\xfeb"); got != "a\uFFFD\uFFFDb" {
		t.Errorf("two bad bytes: %q, want two U+FFFD", got)
	}
}
