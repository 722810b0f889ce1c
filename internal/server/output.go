package server

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// streamReserve is the part of each stream's share of the response kept
// for the truncation marker, the JSON keys and the other fields, so that
// two full streams still fit in twice the share.
const streamReserve = 1024

// capture keeps the first limit bytes written to it and counts the rest.
// os/exec writes each stream from one goroutine, so it needs no lock.
type capture struct {
	buf   []byte
	limit int
	total int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// jsonCost is how many bytes r takes inside a JSON string as
// encoding/json writes it with HTML escaping off (rounded up for the
// rare short escapes, never down).
func jsonCost(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20, r == '\u2028', r == '\u2029':
		return 6
	default:
		return utf8.RuneLen(r)
	}
}

// render turns the captured bytes into the string the response carries
// and reports whether anything was dropped. Bytes that are not valid UTF-8
// become U+FFFD, one per invalid byte. The result, JSON-encoded, takes at
// most share-streamReserve bytes including the truncation marker, which
// names the stream and how many of its bytes were dropped.
func (c *capture) render(stream string, share int) (string, bool) {
	budget := max(share-streamReserve, 0)
	cost, kept := 2, 0 // the quotes
	fits := true
	for kept < len(c.buf) {
		r, size := utf8.DecodeRune(c.buf[kept:])
		if r == utf8.RuneError && size == 1 && c.total > int64(len(c.buf)) && !utf8.FullRune(c.buf[kept:]) {
			break // a rune cut in two by the capture limit: drop its head
		}
		n := jsonCost(r)
		if cost+n > budget {
			fits = false
			break
		}
		cost += n
		kept += size
	}
	if fits && kept == len(c.buf) && c.total == int64(len(c.buf)) {
		return sanitize(c.buf, ""), false
	}
	marker := fmt.Sprintf("\n[sandbox-server: %s truncated: %d of %d bytes dropped]\n", stream, c.total-int64(kept), c.total)
	mcost := len(marker) + 2 // two newlines cost one byte more each
	for cost+mcost > budget && kept > 0 {
		_, size := utf8.DecodeLastRune(c.buf[:kept])
		r, _ := utf8.DecodeRune(c.buf[kept-size : kept])
		cost -= jsonCost(r)
		kept -= size
		marker = fmt.Sprintf("\n[sandbox-server: %s truncated: %d of %d bytes dropped]\n", stream, c.total-int64(kept), c.total)
		mcost = len(marker) + 2
	}
	return sanitize(c.buf[:kept], marker), true
}

// sanitize returns p with each byte that is not part of valid UTF-8
// replaced by U+FFFD, followed by suffix.
func sanitize(p []byte, suffix string) string {
	if utf8.Valid(p) {
		return string(p) + suffix
	}
	var b strings.Builder
	b.Grow(len(p) + len(p)/8 + len(suffix))
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		b.WriteRune(r) // RuneError writes U+FFFD for an invalid byte
		i += size
	}
	b.WriteString(suffix)
	return b.String()
}
