package mcpserver

import (
	"bytes"
	"encoding/json"
)

// memberScanner finds the top-level "id" and "method" members of one
// JSON-RPC message that arrives in pieces too large to hold, without
// buffering any value: it keeps the nesting depth, whether it is inside a
// string and after a backslash, and copies only the raw bytes of those two
// members' values, each up to its cap. Members may come in any order (the
// TypeScript SDK writes "id" after a large "params"); a repeated member
// counts its last occurrence, as encoding/json does when decoding into a
// map. Feed it the message's bytes with Write, then read the fields.
//
// It does not validate: on input that is not a JSON object its results
// mean nothing, but it stays bounded and never panics.
type memberScanner struct {
	started  bool // saw the first non-space byte
	object   bool // the message is a JSON object
	done     bool // the top-level value ended
	depth    int
	inString bool
	escape   bool

	wantKey bool // at depth 1, the next string is a member name
	inKey   bool
	key     []byte // raw name, quotes included, up to maxKeyBytes
	keyLong bool
	name    string // the member whose value comes next

	member  string // "id" or "method" while its value is copied, else ""
	val     []byte
	valLong bool

	id        json.RawMessage // last "id" value, raw; nil if absent or longer than maxIDBytes
	hasID     bool
	method    json.RawMessage // last "method" value, raw
	hasMethod bool
}

const (
	// maxKeyBytes bounds a member name's raw bytes the scanner keeps; the
	// longest spelling of "id" or "method" ("\u006d..." for every
	// letter) fits.
	maxKeyBytes = 40
	// maxIDBytes bounds the raw id value kept; a longer one is treated as
	// unusable (no client sends one).
	maxIDBytes = 1024
	// maxMethodBytes bounds the raw method value kept.
	maxMethodBytes = 256
)

// Write feeds the next bytes of the message. It never fails.
func (s *memberScanner) Write(p []byte) (int, error) {
	for _, c := range p {
		if s.done {
			break
		}
		s.step(c)
	}
	return len(p), nil
}

func (s *memberScanner) step(c byte) {
	if s.inString {
		s.keep(c)
		switch {
		case s.escape:
			s.escape = false
		case c == '\\':
			s.escape = true
		case c == '"':
			s.inString = false
			if s.inKey {
				s.inKey = false
				s.endKey()
			}
		}
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		if len(s.val) > 0 && len(s.val) < s.valCap() {
			s.keep(c) // inside a nested value; trailing space is trimmed
		}
		return
	}
	if !s.started {
		s.started = true
		if c != '{' {
			s.done = true
			return
		}
		s.object, s.depth, s.wantKey = true, 1, true
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.wantKey {
			s.wantKey, s.inKey, s.keyLong = false, true, false
			s.key = append(s.key[:0], c)
			return
		}
		s.keep(c)
	case '{', '[':
		s.keep(c)
		s.depth++
	case '}', ']':
		if s.depth == 1 {
			s.endValue()
			s.depth, s.done = 0, true
			return
		}
		s.keep(c)
		s.depth--
	case ':':
		if s.depth == 1 {
			s.startValue()
			return
		}
		s.keep(c)
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.wantKey = true
			return
		}
		s.keep(c)
	default:
		s.keep(c)
	}
}

// keep copies c into the member name or the copied value, up to their caps.
func (s *memberScanner) keep(c byte) {
	switch {
	case s.inKey:
		if len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	case s.member != "":
		if len(s.val) < s.valCap() {
			s.val = append(s.val, c)
		} else {
			s.valLong = true
		}
	}
}

// valCap is how many raw bytes of the current member's value are kept.
func (s *memberScanner) valCap() int {
	if s.member == "method" {
		return maxMethodBytes
	}
	return maxIDBytes
}

func (s *memberScanner) endKey() {
	s.name = ""
	if s.keyLong {
		return
	}
	var name string
	if json.Unmarshal(s.key, &name) == nil {
		s.name = name
	}
}

func (s *memberScanner) startValue() {
	s.val, s.valLong = s.val[:0], false
	if s.name == "id" || s.name == "method" {
		s.member = s.name
	}
	s.name = ""
}

func (s *memberScanner) endValue() {
	raw := bytes.TrimRight(s.val, " \t\n\r")
	switch s.member {
	case "id":
		s.hasID, s.id = true, nil
		if !s.valLong {
			s.id = append(json.RawMessage(nil), raw...)
		}
	case "method":
		s.hasMethod, s.method = true, nil
		if !s.valLong {
			s.method = append(json.RawMessage(nil), raw...)
		}
	}
	s.member, s.val, s.valLong = "", s.val[:0], false
}

// requestID returns the message's id when it is one a client can match a
// response to: a JSON string or number. ok is false when the message has
// no id, or one that is too long, malformed, or of another type.
func (s *memberScanner) requestID() (id json.RawMessage, ok bool) {
	if !s.object || !s.hasID || len(s.id) == 0 || !json.Valid(s.id) {
		return nil, false
	}
	switch c := s.id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return s.id, true
	}
	return nil, false
}

// methodName returns the message's method, or "" when it has none (a
// response, or not a JSON object) or it is not a short JSON string.
func (s *memberScanner) methodName() string {
	if !s.object || !s.hasMethod {
		return ""
	}
	var m string
	if json.Unmarshal(s.method, &m) != nil {
		return ""
	}
	return m
}
