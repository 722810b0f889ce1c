package local_test

import "syscall"

// syscallKill0 checks that pid exists (signal 0).
func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }
