package queue

import "testing"

func TestFIFO(t *testing.T) {
	r := New(2)
	r.Push(1)
	r.Push(2)
	if r.Push(3) {
		t.Error("Push on a full ring succeeded")
	}
	if a, b := r.Pop(), r.Pop(); a != 1 || b != 2 {
		t.Errorf("got %d %d", a, b)
	}
}

func TestZeroSize(t *testing.T) {
	r := New(0)
	r.Pop()
}
