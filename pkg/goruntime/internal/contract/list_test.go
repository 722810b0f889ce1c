package contract

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecodeList: a listing as the runtime server writes it decodes; each
// bad answer a replaced server can send fails, and those over a cap wrap
// ErrAnswerTooLarge and name it.
func TestDecodeList(t *testing.T) {
	good := `[{"name":"a.go","size":12,"type":"file","mod_time":1700000000.5},{"name":"sub","size":4096,"type":"directory","mod_time":1700000001}]`
	infos, err := decodeList(strings.NewReader(good))
	if err != nil || len(infos) != 2 || infos[0].Name != "a.go" || infos[0].Size != 12 || infos[0].IsDir || !infos[1].IsDir ||
		infos[0].ModTime != time.Unix(1700000000, 5e8) {
		t.Fatalf("good listing: %+v, %v", infos, err)
	}
	if infos, err := decodeList(strings.NewReader(" [ ] ")); err != nil || infos == nil || len(infos) != 0 {
		t.Errorf("empty listing: %#v, %v; want an empty, non-nil slice", infos, err)
	}
	full := "[" + strings.Repeat("{},", maxListEntries-1) + "{}]"
	if infos, err := decodeList(strings.NewReader(full)); err != nil || len(infos) != maxListEntries {
		t.Errorf("a listing of exactly %d entries: %d entries, %v", maxListEntries, len(infos), err)
	}
	for _, tc := range []struct {
		name, body, want string
		tooLarge         bool
	}{
		{"not an array", `{"name":"a"}`, "want a JSON array", false},
		{"not JSON", `<html>`, "invalid character", false},
		{"empty", ``, "EOF", false},
		{"cut short", `[{"name":"a"},`, "EOF", false},
		{"wrong type", `[{"name":5}]`, "cannot unmarshal", false},
		{"one entry too many", "[" + strings.Repeat("{},", maxListEntries) + "{}]", "more than 262144 entries", true},
		{"a huge entry", `[{"name":"` + strings.Repeat("A", 1<<20) + `"}]`, "an entry of the listing is larger", true},
		{"a name past NAME_MAX", `[{"name":"` + strings.Repeat("n", 256) + `"}]`, "a name of 256 bytes", true},
		{"whitespace flood in an entry", `[{` + strings.Repeat(" ", 1<<20) + `}]`, "an entry of the listing is larger", true},
	} {
		_, err := decodeList(strings.NewReader(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrAnswerTooLarge) != tc.tooLarge {
			t.Errorf("%s: %v; want an error containing %q (too large: %v)", tc.name, err, tc.want, tc.tooLarge)
		}
	}
}
