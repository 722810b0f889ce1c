package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, "3"); got != 5 {
		t.Errorf("Add = %d", got)
	}
	if Sub(5, 3) != 2 {
		t.Error("Sub")
	}
}
