package goruntime

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		head, tail int
		want       string
		elided     int
	}{
		{"fits", "hello", 3, 3, "hello", 0},
		{"exact fit", "abcdef", 3, 3, "abcdef", 0},
		{"cut", "abcdefghij", 3, 2, "abc\n[... 5 bytes elided ...]\nij", 5},
		{"negative keeps all", strings.Repeat("x", 100), -1, 2, strings.Repeat("x", 100), 0},
		{"zero head", "abcdef", 0, 2, "\n[... 4 bytes elided ...]\nef", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, elided := HeadTail(tt.in, tt.head, tt.tail)
			if got != tt.want || elided != tt.elided {
				t.Errorf("HeadTail(%q, %d, %d) = %q, %d; want %q, %d", tt.in, tt.head, tt.tail, got, elided, tt.want, tt.elided)
			}
		})
	}
}

func TestHeadTailKeepsRunesWhole(t *testing.T) {
	in := strings.Repeat("é", 50) // 2 bytes each
	for head := 0; head < 10; head++ {
		for tail := 0; tail < 10; tail++ {
			got, elided := HeadTail(in, head, tail)
			if !utf8.ValidString(got) {
				t.Fatalf("HeadTail(head=%d, tail=%d) split a rune: %q", head, tail, got)
			}
			if kept := len(in) - elided; kept > head+tail {
				t.Fatalf("HeadTail(head=%d, tail=%d) kept %d bytes, more than asked", head, tail, kept)
			}
		}
	}
}
