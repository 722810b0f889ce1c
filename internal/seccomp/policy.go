package seccomp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Family is one group of allowed system calls and the reason sandboxed
// programs need it. Calls a family names that this architecture lacks
// (open on arm64, say) are skipped when the program is assembled.
type Family struct {
	Name  string
	Why   string
	Calls []string
}

// Families are the system calls allowed without conditions. Everything a
// Go toolchain, its race detector, cgo with gcc, a POSIX shell and the
// coreutils use is here; the sandbox's namespaces, cgroup and read-only
// mounts bound what each call can reach.
var Families = []Family{
	{"process", "start, wait for and end processes and threads (the go tool, gcc and shells fork and exec; clone is allowed separately, without namespace flags)",
		[]string{"execve", "execveat", "fork", "vfork", "exit", "exit_group", "wait4", "waitid",
			"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "restart_syscall",
			"getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "setsid", "setpgid",
			"prctl", "arch_prctl", "pidfd_open"}},
	{"signals", "signal handling and delivery; kill reaches only the sandbox's own pid namespace (sigqueue and pidfd_send_signal are allowed separately, not for FaultSignals)",
		[]string{"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
			"rt_sigtimedwait", "sigaltstack", "signalfd", "signalfd4",
			"kill", "tkill", "tgkill", "pause", "alarm", "getitimer", "setitimer"}},
	{"memory", "the Go runtime's and libc's allocators; the memory cgroup bounds the total",
		[]string{"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
			"mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "memfd_create",
			"pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack", "mseal"}},
	{"futex", "locks and thread parking (Go runtime, pthreads)",
		[]string{"futex", "futex_waitv", "futex_wait", "futex_wake", "futex_requeue"}},
	{"time", "clocks, sleeps and timers (the Go runtime's profiling timers use timer_create)",
		[]string{"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
			"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
			"timerfd_create", "timerfd_settime", "timerfd_gettime"}},
	{"scheduling", "thread affinity and priorities of the sandbox's own tasks (raising a priority needs CAP_SYS_NICE, which no sandbox process has; the cpu cgroup bounds the total)",
		[]string{"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
			"sched_getscheduler", "sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min",
			"sched_rr_get_interval", "sched_getattr", "sched_setattr", "getpriority", "setpriority",
			"getcpu", "ioprio_get", "ioprio_set"}},
	{"files", "file I/O on the sandbox's own mounts (the rest of the file system is read-only or absent)",
		[]string{"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
			"open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3",
			"fcntl", "flock", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
			"ftruncate", "truncate", "fallocate", "fadvise64", "readahead",
			"copy_file_range", "sendfile", "splice", "tee", "vmsplice", "ioctl"}},
	{"metadata", "stat, directories, links, permissions and extended attributes of files the sandbox may reach",
		[]string{"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
			"access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
			"mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat",
			"unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat",
			"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "fchownat", "lchown", "umask",
			"utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
			"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
			"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
			"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch"}},
	{"polling", "event loops (the Go netpoller uses epoll and eventfd) and pipes",
		[]string{"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
			"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2"}},
	{"network", "sockets in the sandbox's network namespace (only loopback unless the sandbox was opened with network); socket itself is allowed for some address families only",
		[]string{"socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
			"getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown"}},
	{"identity", "reading ids and limits; setting ids or capabilities only within what the process already holds (no sandbox process has CAP_SETUID, CAP_SETGID or any other capability)",
		[]string{"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
			"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
			"capget", "capset", "getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo", "uname", "getrandom"}},
	{"sysv-ipc", "System V shared memory and semaphores, within the sandbox's private IPC namespace",
		[]string{"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
			"msgget", "msgsnd", "msgrcv", "msgctl"}},
	{"self-restriction", "a program may narrow its own rights further (its own seccomp filter, Landlock); neither can widen them",
		[]string{"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}},
}

// namespaceFlags are the clone flags that create namespaces. clone with
// any of them is refused: a sandbox gets no nested user namespace (where
// it would hold every capability) and no other new namespace either.
// (CLONE_NEWTIME shares its bit with clone's exit signal and works only
// through clone3 and unshare, both refused.)
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// SocketDomains are the address families socket(2) may create: unix
// sockets (the runtime server, go's build cache and tools), IPv4/IPv6
// (loopback servers in tests; the network when allowed) and netlink
// (net.Interfaces and glibc's getaddrinfo ask the kernel's routing
// tables). Every other family (packet, vsock, alg, bluetooth, ...) is
// kernel surface no Go program needs.
var SocketDomains = []int{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// Personalities are the personality(2) values allowed: the default Linux
// personality, the query value 0xffffffff, and UNAME26 with and without
// the 32-bit address limit (the set Docker allows). Other values (for
// instance ADDR_NO_RANDOMIZE, which disables ASLR) are refused.
var Personalities = []uint64{0, 0x0008, 0x20000, 0x20008, 0xffffffff}

// FaultSignals are the signals the kernel raises for a faulting
// instruction. A process may not send one of them with a siginfo of its
// own making (rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal with
// an info argument): one whose si_code is not SI_USER or SI_TKILL looks
// like a real fault to the Go runtime, which crashes, and the runtime
// server is a Go program that commands may signal (as the sandbox's init
// it drops every signal sent by kill(2), internal/server/sandboxinit.go;
// it cannot drop a forged fault). Sending them with kill, tgkill or
// pidfd_send_signal without info is allowed.
var FaultSignals = []int{int(unix.SIGILL), int(unix.SIGTRAP), int(unix.SIGBUS), int(unix.SIGFPE),
	int(unix.SIGSEGV), int(unix.SIGSTKFLT), int(unix.SIGSYS)}

// signalSenders are the calls that send a signal with a caller-made
// siginfo, and which argument holds the signal number.
var signalSenders = []struct {
	name   string
	sigArg int
}{{"rt_sigqueueinfo", 1}, {"rt_tgsigqueueinfo", 2}, {"pidfd_send_signal", 1}}

// maxSignal is the highest signal number on Linux (SIGRTMAX).
const maxSignal = 64

// pidfdInfoArg is pidfd_send_signal's info argument: NULL makes the
// kernel fill in SI_USER, like kill.
const pidfdInfoArg = 2

// errnoENOSYS is the action for clone3: "not implemented" makes glibc
// and the Go runtime fall back to clone, whose flags the filter sees
// (clone3 passes them in memory, out of a filter's reach).
const errnoENOSYS = bpfseccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))

// Policy returns the sandbox's seccomp policy for the architecture this
// program runs on.
func Policy() (bpfseccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return bpfseccomp.Policy{}, fmt.Errorf("seccomp: %w", err)
	}
	var allow []string
	for _, f := range Families {
		for _, c := range f.Calls {
			if _, ok := info.SyscallNames[c]; ok {
				allow = append(allow, c)
			}
		}
	}
	var conditional []bpfseccomp.NameWithConditions
	for _, d := range SocketDomains {
		conditional = append(conditional, bpfseccomp.NameWithConditions{Name: "socket",
			Conditions: bpfseccomp.ArgumentConditions{{Argument: 0, Operation: bpfseccomp.Equal, Value: uint64(d)}}})
	}
	for _, p := range Personalities {
		conditional = append(conditional, bpfseccomp.NameWithConditions{Name: "personality",
			Conditions: bpfseccomp.ArgumentConditions{{Argument: 0, Operation: bpfseccomp.Equal, Value: p}}})
	}
	for _, c := range signalSenders {
		if _, ok := info.SyscallNames[c.name]; !ok {
			continue
		}
		// The kernel reads the signal as a 32-bit int: without the
		// bound, a fault signal with high bits set would pass the
		// 64-bit NotEqual tests below.
		notFault := bpfseccomp.ArgumentConditions{{Argument: uint32(c.sigArg), Operation: bpfseccomp.LessOrEqual, Value: maxSignal}}
		for _, sig := range FaultSignals {
			notFault = append(notFault, bpfseccomp.Condition{Argument: uint32(c.sigArg), Operation: bpfseccomp.NotEqual, Value: uint64(sig)})
		}
		conditional = append(conditional, bpfseccomp.NameWithConditions{Name: c.name, Conditions: notFault})
		if c.name == "pidfd_send_signal" {
			conditional = append(conditional, bpfseccomp.NameWithConditions{Name: c.name,
				Conditions: bpfseccomp.ArgumentConditions{{Argument: pidfdInfoArg, Operation: bpfseccomp.Equal, Value: 0}}})
		}
	}
	// clone's flags are its first argument on every architecture Go
	// supports for this backend except s390x, which the backend does not
	// run on.
	conditional = append(conditional, bpfseccomp.NameWithConditions{Name: "clone",
		Conditions: bpfseccomp.ArgumentConditions{{Argument: 0, Operation: bpfseccomp.BitsNotSet, Value: namespaceFlags}}})
	groups := []bpfseccomp.SyscallGroup{
		{Names: allow, NamesWithCondtions: conditional, Action: bpfseccomp.ActionAllow},
	}
	if _, ok := info.SyscallNames["clone3"]; ok {
		groups = append(groups, bpfseccomp.SyscallGroup{Names: []string{"clone3"}, Action: errnoENOSYS})
	}
	return bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionErrno, Syscalls: groups}, nil
}

// Allowed returns the names of the calls the policy allows on this
// architecture, with or without conditions, sorted.
func Allowed() ([]string, error) {
	p, err := Policy()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, g := range p.Syscalls {
		if g.Action != bpfseccomp.ActionAllow {
			continue
		}
		for _, n := range g.Names {
			seen[n] = true
		}
		for _, n := range g.NamesWithCondtions {
			seen[n.Name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Program assembles the policy into the bytes bubblewrap's --seccomp FD
// reads: an array of struct sock_filter (8 bytes each: code, jt, jf, k),
// in this machine's byte order.
func Program() ([]byte, error) {
	p, err := Policy()
	if err != nil {
		return nil, err
	}
	insns, err := Assemble(p)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble BPF: %w", err)
	}
	var buf bytes.Buffer
	for _, in := range raw {
		_ = binary.Write(&buf, binary.NativeEndian, struct {
			Op     uint16
			Jt, Jf uint8
			K      uint32
		}{in.Op, in.Jt, in.Jf, in.K})
	}
	return buf.Bytes(), nil
}
