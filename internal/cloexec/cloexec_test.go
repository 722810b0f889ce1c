package cloexec

import (
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// inherited opens n descriptors without close-on-exec, as a parent
// leaves them to its child, and closes them when the test ends.
func inherited(t *testing.T, n int) []int {
	t.Helper()
	var fds []int
	for range n {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		fds = append(fds, fd)
	}
	return fds
}

func inheritable(t *testing.T) []int {
	t.Helper()
	fds, err := Inheritable()
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

func TestExceptKeepsOnlyWhatItIsTold(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(first, last int) error
	}{{"close_range", mark}, {"listed", markListed}} {
		t.Run(tc.name, func(t *testing.T) {
			fds := inherited(t, 5)
			for _, fd := range fds {
				if !slices.Contains(inheritable(t), fd) {
					t.Fatalf("descriptor %d opened without O_CLOEXEC is not inheritable: the test sees nothing", fd)
				}
			}
			// Keep the second and the fourth, past the end and below 3.
			keep := []int{fds[3], 1, fds[1], fds[1], 1 << 20}
			if err := except(tc.mark, keep...); err != nil {
				t.Fatal(err)
			}
			want := []int{fds[1], fds[3]}
			slices.Sort(want)
			if got := inheritable(t); !slices.Equal(got, want) {
				t.Errorf("inheritable after Except(%v) = %v, want %v", keep, got, want)
			}
			// Still open and usable here.
			for _, fd := range fds {
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
					t.Errorf("descriptor %d: %v (Except must not close)", fd, err)
				}
			}
			if err := except(tc.mark); err != nil {
				t.Fatal(err)
			}
			if got := inheritable(t); len(got) != 0 {
				t.Errorf("inheritable after Except() = %v, want none", got)
			}
		})
	}
}
