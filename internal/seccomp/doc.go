// Package seccomp holds the system call policy every process in a local
// sandbox runs under, and assembles it into the classic-BPF program that
// bubblewrap's --seccomp FD loads.
//
// The policy is an allow list: a call it does not name fails with EPERM
// (ENOSYS for clone3, so that C libraries fall back to clone, whose flags
// the filter can inspect). The floor is Docker's default profile for a
// container without capabilities: everything that profile refuses is
// refused here too (TestPolicyWithinDockerDefault checks the allow list
// against github.com/moby/profiles/seccomp), and some calls it allows are
// refused as well (ptrace, process_vm_*, io_submit and friends, modify_ldt,
// POSIX message queues, ...). docs/local-backend.md lists the families and
// why each allowed one is needed.
//
// ForgedFaultPolicy is a second, small policy: the deny list the runtime
// server loads on itself as a sandbox's init (internal/server, --init),
// refusing fault signals sent with a forged siginfo; GuardedInitPolicy
// (--init-guard, a pod's init) adds every way to signal PID 1.
//
// Policies are written in github.com/elastic/go-seccomp-bpf's types and
// its syscall tables, but assembled here (Assemble, for the architecture
// this binary runs on) and loaded here (Load): that library's own
// assembler compares a later rule's call number against the last
// argument it loaded, so its programs refused kill(200, SIGKILL) under
// GuardedInitPolicy and let socket((56<<32)|AF_VSOCK, …) through Policy
// (assemble.go). Every program refuses calls from another ABI (i386
// through int 0x80, x32): the init policies too, which are deny lists
// and would otherwise let every i386 call through (docs/e2e.md).
package seccomp
