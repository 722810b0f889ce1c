package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Load assembles p (Assemble) and installs it on every thread of this
// process (SECCOMP_FILTER_FLAG_TSYNC), after setting no_new_privs, which
// the kernel requires of a process without CAP_SYS_ADMIN; the processes
// this one starts inherit both. The runtime server loads its init policy
// this way (internal/server, --init); a local sandbox's Policy is loaded
// by bubblewrap from Program's bytes instead.
func Load(p bpfseccomp.Policy) error {
	insns, err := Assemble(p)
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return fmt.Errorf("seccomp: assemble BPF: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// no_new_privs is per thread: set it on the thread that loads the
	// filter; TSYNC then gives filter and bit to every other thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp: load the filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("seccomp: load the filter: thread %d could not take it (TSYNC)", r)
	}
	return nil
}
