// Package cloexec keeps descriptors from crossing an exec by accident.
//
// A process inherits every descriptor its parent held without the
// close-on-exec flag, and passes each on to what it execs: a descriptor
// an MCP client, an IDE or a shell left open in the program that started
// us would otherwise reach every sandboxed command (a directory of the
// host, a writable file, a socket). The Go runtime opens its own
// descriptors close-on-exec, and os/exec hands a child exactly its
// standard streams and ExtraFiles; what is left is what this process
// inherited. Except marks those close-on-exec, so that from then on a
// process we exec gets only what we hand it.
//
// The package is imported by the processes on the way into a sandbox
// (the gate, which becomes bubblewrap; the runtime server; its process
// API companion), so it imports only the standard library and x/sys.
package cloexec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Except marks every descriptor of this process above standard error
// close-on-exec, but those in keep. Descriptors stay open and usable in
// this process; only an exec drops them. It uses close_range(2) with
// CLOSE_RANGE_CLOEXEC (Linux 5.11), else (an older kernel, or a seccomp
// policy that refuses it) each descriptor /proc/self/fd lists.
func Except(keep ...int) error { return except(mark, keep...) }

// except is Except with mark marking each range.
func except(mark func(first, last int) error, keep ...int) error {
	keep = slices.Clone(keep)
	slices.Sort(keep)
	lo := 3
	for _, k := range slices.Compact(keep) {
		if k < lo {
			continue
		}
		if k > lo {
			if err := mark(lo, k-1); err != nil {
				return err
			}
		}
		lo = k + 1
	}
	return mark(lo, math.MaxInt32)
}

// mark marks descriptors first to last close-on-exec.
func mark(first, last int) error {
	if unix.CloseRange(uint(first), uint(last), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	return markListed(first, last)
}

// markListed is mark without close_range: each descriptor /proc/self/fd
// lists.
func markListed(first, last int) error {
	fds, err := open()
	if err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: close_range refused, and %w", err)
	}
	for _, fd := range fds {
		if fd < first || fd > last {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}

// Inheritable lists the descriptors above standard error that an exec
// would pass on: those without the close-on-exec flag.
func Inheritable() ([]int, error) {
	fds, err := open()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, fd := range fds {
		if fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // the directory listing's own, closed since
		}
		if flags&unix.FD_CLOEXEC == 0 {
			out = append(out, fd)
		}
	}
	return out, nil
}

// open lists this process's open descriptors, in order.
func open() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("list open descriptors: %w", err)
	}
	fds := make([]int, 0, len(ents))
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds) // ReadDir's order is the names'
	return fds, nil
}
