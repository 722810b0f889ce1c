// Package sandboxattack holds the attack program the isolation tests build
// inside a sandbox and run against its runtime server: the local
// backend's battery (pkg/goruntime/local, pid1_test.go), the server's
// own tests as PID 1 (internal/server) and the pod battery of the
// end-to-end tests (test/e2e). It is source text, uploaded and compiled
// in the sandbox; nothing here runs on the host.
package sandboxattack

// Files returns the attack program's files by name in its directory
// (module "attack", no dependencies): go.mod, main.go (Main) and the i386
// calls (i386_amd64.go with its assembly, i386_other.go). Build it with
// `go build` in that directory.
func Files() map[string]string {
	return map[string]string{
		"go.mod":        "module attack\n\ngo 1.22\n",
		"main.go":       Main,
		"i386_amd64.go": i386AMD64,
		"i386_amd64.s":  i386AMD64Asm,
		"i386_other.go": i386Other,
	}
}

// Main is the attack program's main.go. It runs as `attack MODE PID
// [SIG]` against process PID and prints "DONE ..." when the attack went
// through or "REFUSED ..." with the error that stopped it. Modes:
//   - environ, fd: read /proc/PID/environ, list /proc/PID/fd;
//   - mem: open /proc/PID/mem for writing and overwrite the start of the
//     server's code;
//   - ptrace: PTRACE_ATTACH;
//   - sigqueue SIG, pidfd SIG: send SIG with a forged siginfo (si_code
//     SI_QUEUE) through rt_sigqueueinfo and pidfd_send_signal;
//   - i386kill SIG, i386sigqueue SIG: kill, and sigqueue's forged
//     siginfo, through the i386 interface (int $0x80), whose calls the
//     kernel numbers from the i386 table (kill 37, rt_sigqueueinfo 178)
//     and reports with AUDIT_ARCH_I386, so a filter written for amd64's
//     table does not name them; "UNSUPPORTED ..." where this build has no
//     i386 interface (not amd64);
//   - setsig SIG: make a pipe's I/O readiness send SIG to PID (fcntl
//     F_SETOWN PID, F_SETSIG SIG, O_ASYNC), then write to the pipe;
//   - cloneparent SIG: a child with exit signal SIG whose parent is this
//     process's parent (CLONE_PARENT), which exits at once;
//   - orphan SIG: a child with exit signal SIG that outlives this process
//     by 0.3 s, so PID 1 reaps it;
//   - joinpgid: move this process into process group PID (setpgid);
//   - killchild: not an attack: start sleep, kill it through os.Process
//     (pidfd_send_signal where the Go runtime finds it works, kill
//     otherwise) and report how it ended.
const Main = `package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

func main() {
	mode, pid := os.Args[1], os.Args[2]
	n, _ := strconv.Atoi(pid)
	switch mode {
	case "environ":
		b, err := os.ReadFile("/proc/" + pid + "/environ")
		report(err, fmt.Sprintf("read %d bytes of environ", len(b)))
	case "fd":
		ents, err := os.ReadDir("/proc/" + pid + "/fd")
		report(err, fmt.Sprintf("listed %d fds", len(ents)))
	case "mem":
		f, err := os.OpenFile("/proc/"+pid+"/mem", os.O_RDWR, 0)
		if err != nil {
			report(err, "")
			return
		}
		defer f.Close()
		maps, err := os.ReadFile("/proc/" + pid + "/maps")
		if err != nil {
			report(err, "")
			return
		}
		for _, line := range strings.Split(string(maps), "\n") {
			if m := strings.Fields(line); len(m) >= 6 && m[1] == "r-xp" && strings.HasSuffix(m[5], "server") {
				lo, _ := strconv.ParseUint(strings.Split(m[0], "-")[0], 16, 64)
				_, err = f.WriteAt(make([]byte, 4096), int64(lo))
				report(err, fmt.Sprintf("overwrote the server's code at %#x", lo))
				return
			}
		}
		report(nil, "opened mem for writing (no code mapping found)")
	case "ptrace":
		err := syscall.PtraceAttach(n)
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(n, &ws, syscall.WALL, nil)
			syscall.PtraceDetach(n)
		}
		report(err, "attached with ptrace")
	case "sigqueue", "pidfd":
		sig, _ := strconv.Atoi(os.Args[3])
		var info [128]byte
		*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
		*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
		*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
		*(*uint32)(unsafe.Pointer(&info[20])) = uint32(os.Getuid())
		var errno syscall.Errno
		if mode == "sigqueue" {
			_, _, errno = syscall.RawSyscall(syscall.SYS_RT_SIGQUEUEINFO, uintptr(n), uintptr(sig), uintptr(unsafe.Pointer(&info)))
		} else {
			pfd, _, e := syscall.RawSyscall(434, uintptr(n), 0, 0) // pidfd_open
			if e != 0 {
				report(e, "")
				return
			}
			_, _, errno = syscall.RawSyscall6(424, pfd, uintptr(sig), uintptr(unsafe.Pointer(&info)), 0, 0, 0) // pidfd_send_signal
		}
		var err error
		if errno != 0 {
			err = errno
		}
		report(err, fmt.Sprintf("sent signal %d with a forged siginfo", sig))
	case "i386kill", "i386sigqueue":
		sig, _ := strconv.Atoi(os.Args[3])
		var err error
		if mode == "i386kill" {
			err = i386Call(i386Kill, uint32(n), uint32(sig), 0)
		} else {
			// struct compat_siginfo: signo, errno, code (SI_QUEUE), then
			// _rt's pid and uid; below 4 GiB, where an i386 pointer reaches.
			info, addr, e := low32(128)
			if e != nil {
				report(e, "")
				return
			}
			for i, v := range []int32{int32(sig), 0, -1, int32(os.Getpid()), int32(os.Getuid())} {
				*(*int32)(unsafe.Pointer(&info[4*i])) = v
			}
			err = i386Call(i386RtSigqueueinfo, uint32(n), uint32(sig), addr)
		}
		if errors.Is(err, errNoI386) {
			fmt.Println("UNSUPPORTED", err)
			return
		}
		report(err, fmt.Sprintf("%s: signal %d through int $0x80", mode, sig))
	case "cloneparent", "orphan":
		// A child whose exit signal is SIG: with CLONE_PARENT, a sibling
		// the server is parent of; without it, an orphan the server
		// reaps once this process exits.
		sig, _ := strconv.Atoi(os.Args[3])
		flags := uintptr(sig)
		if mode == "cloneparent" {
			flags |= syscall.CLONE_PARENT
		}
		r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, flags, 0, 0, 0, 0, 0)
		if e != 0 {
			report(e, "")
			return
		}
		if r == 0 {
			if mode == "orphan" {
				ts := syscall.Timespec{Nsec: 300e6}
				syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
		report(nil, fmt.Sprintf("made a child with exit signal %d", sig))
	case "joinpgid":
		report(syscall.Setpgid(0, n), fmt.Sprintf("joined process group %d", n))
	case "setsig":
		// I/O readiness on a pipe signals its owner, PID, with SIG.
		sig, _ := strconv.Atoi(os.Args[3])
		var p [2]int
		if err := syscall.Pipe(p[:]); err != nil {
			report(err, "")
			return
		}
		const fSETSIG = 10
		_, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(p[0]), syscall.F_SETOWN, uintptr(n))
		if e == 0 {
			_, _, e = syscall.Syscall(syscall.SYS_FCNTL, uintptr(p[0]), fSETSIG, uintptr(sig))
		}
		if e == 0 {
			_, _, e = syscall.Syscall(syscall.SYS_FCNTL, uintptr(p[0]), syscall.F_SETFL, syscall.O_ASYNC|syscall.O_NONBLOCK)
		}
		if e != 0 {
			report(e, "")
			return
		}
		syscall.Write(p[1], []byte("x"))
		report(nil, fmt.Sprintf("armed signal %d on I/O for %s", sig, pid))
	}
}

func init() {
	if len(os.Args) > 1 && os.Args[1] == "killchild" {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			report(err, "")
			os.Exit(0)
		}
		err := c.Process.Kill()
		if err == nil {
			err = c.Wait()
			report(nil, fmt.Sprintf("child ended: %v", err))
		} else {
			report(err, "")
		}
		os.Exit(0)
	}
}

// i386 call numbers (arch/x86/entry/syscalls/syscall_32.tbl).
const (
	i386Kill           = 37
	i386RtSigqueueinfo = 178
)

// errNoI386: this build has no i386 interface to call (i386_other.go).
var errNoI386 = errors.New("i386 system calls: only on amd64")

func report(err error, done string) {
	if err != nil {
		fmt.Println("REFUSED", err)
		return
	}
	fmt.Println("DONE", done)
}
`

// i386AMD64 is i386_amd64.go: the i386 calls through int $0x80 (as
// internal/seccomp/i386call makes them on the host, which the program
// cannot import).
const i386AMD64 = `package main

import (
	"syscall"
	"unsafe"
)

// int80 loads eax, ebx, ecx and edx with nr and a1-a3, executes int
// $0x80 and returns rax (i386_amd64.s).
func int80(nr, a1, a2, a3 uintptr) uintptr

// i386Call makes i386 call nr with arguments a1-a3 and returns the errno
// it failed with, or nil. Only for calls that do not block.
func i386Call(nr, a1, a2, a3 uint32) error {
	if r := int32(int80(uintptr(nr), uintptr(a1), uintptr(a2), uintptr(a3))); r < 0 && r > -4096 {
		return syscall.Errno(-r)
	}
	return nil
}

// low32 maps n zeroed bytes below 4 GiB, where an i386 call's pointer
// argument reaches them, and returns them with their address.
func low32(n int) ([]byte, uint32, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_32BIT)
	if err != nil {
		return nil, 0, err
	}
	return b, uint32(uintptr(unsafe.Pointer(&b[0]))), nil
}
`

// i386AMD64Asm is i386_amd64.s.
const i386AMD64Asm = `#include "textflag.h"

// func int80(nr, a1, a2, a3 uintptr) uintptr
TEXT ·int80(SB), NOSPLIT, $0-40
	MOVQ nr+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ a2+16(FP), CX
	MOVQ a3+24(FP), DX
	INT  $0x80
	MOVQ AX, ret+32(FP)
	RET
`

// i386Other is i386_other.go: no i386 interface off amd64.
const i386Other = `//go:build !amd64

package main

func i386Call(nr, a1, a2, a3 uint32) error { return errNoI386 }

func low32(n int) ([]byte, uint32, error) { return nil, 0, errNoI386 }
`
