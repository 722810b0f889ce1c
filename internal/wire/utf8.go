package wire

import (
	"strings"
	"unicode/utf8"
)

// ValidUTF8 is s with each byte that is not part of valid UTF-8 replaced
// by U+FFFD, one per byte, as encoding/json writes a command's output into
// an /execute answer. Every way a command's output reaches a caller (the
// process API's streams too) goes through it, so that the same bytes read
// the same whichever way they came.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		// Ranging over a string yields U+FFFD, width 1, for each bad byte.
		b.WriteRune(r)
	}
	return b.String()
}
