package agentsandbox

import (
	"testing"
	"time"
)

func TestTimedOut(t *testing.T) {
	const term = "timeout: sending signal TERM to command ‘/bin/sh’\n"
	const kill = "timeout: sending signal KILL to command '/bin/sh'\n"
	for _, tc := range []struct {
		name       string
		exit       int
		stderr     string
		hit        bool
		wantStderr string
	}{
		{"term", 124, "partial\n" + term, true, "partial\n"},
		{"kill via server", 137, "x\n" + term + kill + "[sandbox-server: command killed by signal 9 (killed)]\n", true, "x\n"},
		{"kill, signal as -9", -9, term + kill, true, ""},
		{"own exit 124", 124, "failed\n", false, "failed\n"},
		{"marker not last", 124, term + "more output\n", false, term + "more output\n"},
		{"marker for another command", 124, "timeout: sending signal TERM to command 'sleep'\n", false, "timeout: sending signal TERM to command 'sleep'\n"},
		{"other exit code", 1, term, false, term},
		{"signal 9 without marker", 137, "[sandbox-server: command killed by signal 9 (killed)]\n", false, "[sandbox-server: command killed by signal 9 (killed)]\n"},
	} {
		hit, stderr := timedOut(tc.exit, tc.stderr)
		if hit != tc.hit || stderr != tc.wantStderr {
			t.Errorf("%s: timedOut = %v, %q; want %v, %q", tc.name, hit, stderr, tc.hit, tc.wantStderr)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30s",
		1500 * time.Millisecond: "1.5s",
		time.Microsecond:        "0.001s",
		0:                       "0.001s",
		1001 * time.Microsecond: "0.002s",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%s) = %q, want %q", d, got, want)
		}
	}
}
