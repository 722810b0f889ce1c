package mathx

import "testing"

func TestGCD(t *testing.T) {
	if GCD(12, 18) != 6 || GCD(-4, 6) != 2 {
		t.Fatal("GCD")
	}
}
