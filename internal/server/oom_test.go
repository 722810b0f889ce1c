package server

import (
	"strconv"
	"strings"
	"testing"
)

// TestCommandOOMScoreFirst: every command the server starts is the OOM
// killer's first choice (oom_score_adj 1000), so a memory bomb made of
// many small processes kills them, not the server.
func TestCommandOOMScoreFirst(t *testing.T) {
	ts := startServer(t, nil)
	// The server writes the value right after the shell starts; the pause
	// keeps the read after it.
	res := ts.run(t, "sleep 0.3; cat /proc/$$/oom_score_adj; cat /proc/$PPID/oom_score_adj")
	lines := strings.Fields(res.Stdout)
	if len(lines) != 2 {
		t.Fatalf("output %q (stderr %q), want two values", res.Stdout, res.Stderr)
	}
	if lines[0] != strconv.Itoa(commandOOMScoreAdj) {
		t.Errorf("command's oom_score_adj = %s, want %d", lines[0], commandOOMScoreAdj)
	}
	if lines[1] == lines[0] {
		t.Errorf("the server's own oom_score_adj is the command's (%s): it must stay below", lines[1])
	}
}
