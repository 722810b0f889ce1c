//go:build !amd64

package i386call

const supported = false

const mapLow32 = 0

func int80(nr, a1, a2, a3 uintptr) uintptr { panic(ErrUnsupported) }

func addr(b []byte) uintptr { panic(ErrUnsupported) }
