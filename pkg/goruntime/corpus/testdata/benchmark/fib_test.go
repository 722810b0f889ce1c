package fib

import (
	"strings"
	"testing"
)

func fibRec(n int) int {
	if n < 2 {
		return n
	}
	return fibRec(n-1) + fibRec(n-2)
}

func fibIter(n int) int {
	a, b := 0, 1
	for range n {
		a, b = b, a+b
	}
	return a
}

func TestFibAgree(t *testing.T) {
	for n := range 20 {
		if fibRec(n) != fibIter(n) {
			t.Fatalf("n=%d", n)
		}
	}
}

func BenchmarkFibRec(b *testing.B) {
	for b.Loop() {
		fibRec(15)
	}
}

func BenchmarkFibIter(b *testing.B) {
	for i := 0; i < b.N; i++ {
		fibIter(90)
	}
}

func BenchmarkJoin(b *testing.B) {
	parts := strings.Fields("a b c d e f g h")
	b.ReportAllocs()
	for b.Loop() {
		_ = strings.Join(parts, ",")
	}
}
