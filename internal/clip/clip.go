package clip

import "unicode/utf8"

// String returns s when it has at most n bytes; otherwise its first n
// bytes, cut back to a rune boundary, followed by "…".
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
