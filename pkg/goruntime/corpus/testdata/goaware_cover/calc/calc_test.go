package calc

import "testing"

func TestSign(t *testing.T) {
	if Sign(5) != 1 {
		t.Fatal("Sign(5)")
	}
}
