// Package i386call makes system calls through the i386 interface (int
// $0x80) from a linux/amd64 process, as a GOARCH=386 program does. Tests
// use it to check that a seccomp filter refuses such calls: the kernel
// reports them with AUDIT_ARCH_I386 and i386 call numbers (Kill,
// RtSigqueueinfo below), which a filter written for amd64's table does
// not name. Nothing outside tests imports it.
package i386call

import (
	"errors"

	"golang.org/x/sys/unix"
)

// i386 call numbers (arch/x86/entry/syscalls/syscall_32.tbl).
const (
	Getpid         = 20
	Kill           = 37
	RtSigqueueinfo = 178
)

// ErrUnsupported: this build has no i386 interface to call (not
// linux/amd64).
var ErrUnsupported = errors.New("i386 system calls: only on linux/amd64")

// Syscall makes i386 call nr with arguments a1-a3, each truncated to 32
// bits (a pointer must lie below 4 GiB: see Low32), and returns its
// result, or the errno it failed with. Only for calls that do not block:
// the Go scheduler is not told. ErrUnsupported on other architectures;
// a kernel without IA32 emulation answers ENOSYS (or kills the process,
// with ia32_emulation=0 on some kernels).
func Syscall(nr, a1, a2, a3 uint32) (uint32, error) {
	if !supported {
		return 0, ErrUnsupported
	}
	r := int32(int80(uintptr(nr), uintptr(a1), uintptr(a2), uintptr(a3)))
	if r < 0 && r > -4096 {
		return 0, unix.Errno(-r)
	}
	return uint32(r), nil
}

// Low32 maps n bytes of zeroed memory below 4 GiB (MAP_32BIT), where an
// i386 call's pointer argument can reach it, and returns it with its
// address.
func Low32(n int) ([]byte, uint32, error) {
	if !supported {
		return nil, 0, ErrUnsupported
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|mapLow32)
	if err != nil {
		return nil, 0, err
	}
	return b, uint32(addr(b)), nil
}
