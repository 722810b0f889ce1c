package sandboxid

import "testing"

func TestValid(t *testing.T) {
	if id := New(); !Valid(id) {
		t.Errorf("New() = %q is not Valid", id)
	}
	for _, id := range []string{"", "0123456789abcde", "0123456789ABCDEF", "0123456789abcdeg", "../0123456789abc", "check-0123456789abcdef"} {
		if Valid(id) {
			t.Errorf("Valid(%q) = true", id)
		}
	}
}
