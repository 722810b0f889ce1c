package agentsandbox

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The SDK's Run sends only {"command": ...}, so ExecRequest.Env and
// ExecRequest.Timeout travel inside the command line itself:
//
//	export K='v'; exec timeout --verbose --kill-after=5s 30s /bin/sh -c '<command>'
//
// The runtime server runs that with /bin/sh -c. GNU coreutils timeout
// (present in our runtime image, and in any Debian-based one) runs the
// command, and when the deadline passes sends SIGTERM to it and then to its
// whole process group, SIGKILL after killGrace if anything is still alive,
// and exits 124 (137 when SIGKILL was needed). --verbose makes it say so on
// stderr ("timeout: sending signal TERM to command '/bin/sh'"), which is how
// a timeout is told apart from a command that itself exits 124; the line is
// removed from the stderr we report.

// MaxCommandBytes is the longest command this backend runs. The wrapper
// hands the command to /bin/sh -c as one argument, and Linux refuses any
// single argument over 128 KiB (MAX_ARG_STRLEN); the rest is headroom.
// Longer scripts belong in a file (WriteFile, then run it with sh).
const MaxCommandBytes = 120 << 10

// killGrace is how long a timed-out command has between SIGTERM and SIGKILL.
const killGrace = 5 * time.Second

// timeoutMarker matches the line coreutils timeout --verbose prints when it
// signals our wrapper's /bin/sh (quotes vary with the locale).
var timeoutMarker = regexp.MustCompile(`(?m)^timeout: sending signal [A-Z0-9]+ to command .?/bin/sh.?\n?`)

// serverKillNote matches the note cmd/sandbox-server appends to stderr when
// a command dies of SIGKILL, which timeout's KILL causes.
var serverKillNote = regexp.MustCompile(`\[sandbox-server: command killed by signal 9[^\n]*\]\n?$`)

// wrapCommand returns the shell line that runs command with env added and,
// when timeout > 0, under coreutils timeout. Errors name the bad input; a
// command over MaxCommandBytes gets one wrapping goruntime.ErrTooLarge.
func wrapCommand(command string, env map[string]string, timeout time.Duration) (string, error) {
	if len(command) > MaxCommandBytes {
		return "", fmt.Errorf("command is %d bytes, over this backend's limit of %d (120 KiB): it runs as /bin/sh -c '<command>' and Linux caps one argument at 128 KiB (MAX_ARG_STRLEN); write a long script to a file and run that file instead: %w",
			len(command), MaxCommandBytes, goruntime.ErrTooLarge)
	}
	if strings.ContainsRune(command, 0) {
		return "", fmt.Errorf("command contains a NUL byte")
	}
	var b strings.Builder
	if err := goruntime.ValidateEnv(env); err != nil {
		return "", err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "export %s=%s; ", k, shell.Quote(env[k]))
	}
	if timeout <= 0 {
		if b.Len() == 0 {
			return command, nil
		}
		b.WriteString("exec /bin/sh -c ")
		b.WriteString(shell.Quote(command))
		return b.String(), nil
	}
	fmt.Fprintf(&b, "exec timeout --verbose --kill-after=%s %s /bin/sh -c %s",
		seconds(killGrace), seconds(timeout), shell.Quote(command))
	return b.String(), nil
}

// seconds formats d for coreutils timeout: decimal seconds, rounded up to
// the millisecond and never zero (0 would mean "no timeout").
func seconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + "s"
}

// timedOut reports whether a wrapped command was killed by its deadline,
// and returns stderr without timeout's own report. Only the exit statuses
// timeout gives a killed command count (124; after SIGKILL, which also
// hits timeout itself, 137 or -9 depending on how the server reports a
// signal), and only when the report is the end of stderr.
func timedOut(exitCode int, stderr string) (bool, string) {
	if exitCode != wire.ExitTimedOut && exitCode != wire.SignalExitCode(9) && exitCode != -9 {
		return false, stderr
	}
	body := stderr
	if exitCode != wire.ExitTimedOut {
		// Our runtime server notes a signal death after the output.
		if loc := serverKillNote.FindStringIndex(body); loc != nil {
			body = body[:loc[0]]
		}
	}
	locs := timeoutMarker.FindAllStringIndex(body, -1)
	if len(locs) == 0 || locs[len(locs)-1][1] != len(body) {
		return false, stderr
	}
	// Remove the trailing run of markers (TERM, then KILL).
	start := len(body)
	for i := len(locs) - 1; i >= 0 && locs[i][1] == start; i-- {
		start = locs[i][0]
	}
	return true, body[:start]
}
