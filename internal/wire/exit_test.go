package wire

import "testing"

func TestExitSignal(t *testing.T) {
	for code, want := range map[int]int{0: 0, 1: 0, ExitTimedOut: 0, 128: 0, 129: 1, SignalExitCode(9): 9, 192: 64, 193: 0, 255: 0, -1: 0} {
		sig, ok := ExitSignal(code)
		if sig != want || ok != (want != 0) {
			t.Errorf("ExitSignal(%d) = %d, %v; want %d", code, sig, ok, want)
		}
	}
}
