package store

import "testing"

func TestAddRefusesNegative(t *testing.T) {
	s := New()
	if err := s.Add("bolt", -1); err == nil {
		t.Fatal("want error")
	}
}
