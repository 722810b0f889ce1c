package mcpserver

import (
	"strings"
	"sync"
)

// waitNote keeps, for a call whose client sent no progress token (so no
// notification reaches it), what the call was told it waits for
// (sessions.Call.Announce: the sandbox starting, then what its open
// reports, e.g. that the standard library's build cache is still being
// built and this call compiles what it needs meanwhile). The result
// then says it in a line, so such a client learns why its first call
// took long. A call that was only told its sandbox is starting gets no
// line: that is every stateful session's first call.
type waitNote struct {
	mu   sync.Mutex
	said []string
}

// announce records one message (a sessions.Call.Announce).
func (w *waitNote) announce(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.said); n == 0 || w.said[n-1] != msg {
		w.said = append(w.said, msg)
	}
}

// line is the note for the result ("" for none): the last thing the
// call was told once it was told more than its sandbox's start.
func (w *waitNote) line() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.said) < 2 {
		return ""
	}
	return "note: while this call waited: " + strings.TrimSpace(w.said[len(w.said)-1]) + "\n"
}
