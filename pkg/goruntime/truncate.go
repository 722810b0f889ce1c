package goruntime

import (
	"fmt"
	"unicode/utf8"
)

// HeadTail keeps the first head and last tail bytes of s, joined by a marker
// line naming how many bytes were elided, and returns that count. Cuts fall
// on UTF-8 boundaries. s is returned whole when it fits or when head or tail
// is negative.
func HeadTail(s string, head, tail int) (string, int) {
	if head < 0 || tail < 0 || len(s) <= head+tail {
		return s, 0
	}
	h := head
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	elided := t - h
	return fmt.Sprintf("%s\n[... %d bytes elided ...]\n%s", s[:h], elided, s[t:]), elided
}
