package main

import "testing"

func TestSeed(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
}

func BenchmarkSeed(b *testing.B) {
	for b.Loop() {
	}
}
