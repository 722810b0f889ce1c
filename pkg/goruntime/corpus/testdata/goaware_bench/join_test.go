package join

import (
	"strings"
	"testing"
)

var sink string

func BenchmarkJoin(b *testing.B) {
	parts := []string{"a", "b", "c"}
	for b.Loop() {
		sink = strings.Join(parts, ",")
	}
}
