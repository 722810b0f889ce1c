package wire

// The exit-code convention every layer reports, the one a POSIX shell and
// timeout(1) use: the server, both backends, the library and the
// conformance oracle all take it from here.
const (
	// ExitTimedOut is the exit code of a command its deadline killed, as
	// timeout(1) reports it.
	ExitTimedOut = 124
	// ExitSignalBase plus N is the exit code of a command signal N ended.
	ExitSignalBase = 128
)

// SignalExitCode is the exit code of a command that signal sig ended:
// 128+sig.
func SignalExitCode(sig int) int { return ExitSignalBase + sig }

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

// ExitSignal is the signal that, by this convention, ended a command
// that reported exit code code (128+N for N in 1..64); ok is false for
// any other code.
func ExitSignal(code int) (sig int, ok bool) {
	sig = code - ExitSignalBase
	if sig < 1 || sig > maxSignal {
		return 0, false
	}
	return sig, true
}
