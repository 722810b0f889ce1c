package i386call

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const supported = true

const mapLow32 = unix.MAP_32BIT

// int80 loads eax, ebx, ecx and edx with nr and a1-a3, executes int
// $0x80 and returns rax (int80_amd64.s).
func int80(nr, a1, a2, a3 uintptr) uintptr

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
