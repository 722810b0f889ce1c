package local_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// attackMain is a program a command builds in the sandbox and runs
// against the runtime server (its pid is the second argument). Modes:
// environ reads /proc/PID/environ; fd lists /proc/PID/fd; mem opens
// /proc/PID/mem for writing and, if that works, overwrites the start of
// the server's code; ptrace attaches with PTRACE_ATTACH; sigqueue SIG and
// pidfd SIG send signal SIG with a forged siginfo (si_code SI_QUEUE),
// through rt_sigqueueinfo and pidfd_send_signal. Each prints what it did
// ("DONE ...") or why it could not ("REFUSED ...").
const attackMain = `package main

import (
	"fmt"
	"os"
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
	}
}

func report(err error, done string) {
	if err != nil {
		fmt.Println("REFUSED", err)
		return
	}
	fmt.Println("DONE", done)
}
`

// armAttacker writes keep.txt (serverIntact) and builds the attack
// program at /tmp/attack in s.
func armAttacker(s *goruntime.Session) findings {
	var f findings
	f.mustOK(s, goruntime.Request{
		Files: []goruntime.File{
			{Path: "keep.txt", Data: []byte("kept")},
			{Path: "attack/go.mod", Data: []byte("module attack\n\ngo 1.22\n")},
			{Path: "attack/main.go", Data: []byte(attackMain)},
		},
		Command: "cd attack && go build -o /tmp/attack .",
	})
	return f
}

// pid1Session opens a session armed for the attacks (armAttacker).
func pid1Session(t *testing.T, opts local.Options) *goruntime.Session {
	t.Helper()
	s := openSession(t, newBackend(t, opts))
	require(t, armAttacker(s))
	return s
}

// serverIsPID1: the runtime server is the sandbox's PID 1, alone.
func serverIsPID1(s *goruntime.Session) findings {
	var f findings
	res := f.mustOK(s, goruntime.Request{Command: "tr '\\0' ' ' </proc/1/cmdline; echo; pgrep -x server"})
	if res == nil {
		return f
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "/.sandbox/server ") || strings.TrimSpace(lines[1]) != "1" {
		f.add("PID 1 is %q and the server's pids are %q; want the server, alone, at PID 1", lines[0], lines[1:])
	}
	return f
}

// TestServerIsPID1: the runtime server is the sandbox's init, so the
// kernel shields it from its commands.
func TestServerIsPID1(t *testing.T) {
	check(t, serverIsPID1(openSession(t, newBackend(t, testOptions()))))
}

// killServerAttacks: whatever signal a command sends the runtime server
// (PID 1), to every process (-1) or to its uid, the server goes on
// answering and the session's files stay. s is armed (armAttacker).
func killServerAttacks(s *goruntime.Session) findings {
	var f findings
	for _, cmd := range []string{
		"kill -9 -1",
		"kill -TERM -1",
		"pkill -u sandbox",
		"pkill -9 -u sandbox",
		"kill -9 1",
		"kill -STOP 1; kill -STOP -1",
		"kill -QUIT 1",
		"kill -9 $(pgrep -x server)",
	} {
		if f.attack(s, cmd) == nil {
			return f
		}
	}
	for sig := 1; sig <= 64; sig++ {
		for _, cmd := range []string{"kill -%d 1", "kill -%d $(pgrep -x server)", "kill -%d -1"} {
			if f.attack(s, fmt.Sprintf(cmd, sig)) == nil {
				return f
			}
		}
	}
	if res := f.mustOK(s, goruntime.Request{Command: "cat keep.txt"}); res != nil && res.Stdout != "kept" {
		f.add("after the signals: cat keep.txt: %q", res.Stdout)
	}
	return f
}

// TestCommandCannotKillServer: killServerAttacks.
func TestCommandCannotKillServer(t *testing.T) {
	check(t, killServerAttacks(pid1Session(t, testOptions())))
}

// TestCommandCannotForgeFaultSignal: forgeFaultAttacks, with the
// sandbox's seccomp policy and with it relaxed (the server's own filter
// then holds alone).
func TestCommandCannotForgeFaultSignal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		relax local.Relax
	}{{"seccomp", local.Relax{}}, {"seccomp relaxed", local.Relax{Seccomp: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.Relax.Seccomp = tc.relax.Seccomp // the rest as testOptions has it
			check(t, forgeFaultAttacks(pid1Session(t, opts)))
		})
	}
}

// forgeFaultAttacks: a signal sent with a siginfo of the command's making
// (si_code SI_QUEUE) looks like a real fault to the Go runtime; the
// sandbox's seccomp policy and the server's own filter (which holds with
// the former relaxed) refuse it for fault signals, and every other one
// the server drops. s is armed (armAttacker).
func forgeFaultAttacks(s *goruntime.Session) findings {
	var f findings
	fault := map[int]bool{4: true, 5: true, 7: true, 8: true, 11: true, 16: true, 31: true}
	for sig := 1; sig <= 64; sig++ {
		for _, mode := range []string{"sigqueue", "pidfd"} {
			res := f.attack(s, fmt.Sprintf("/tmp/attack %s $(pgrep -x server) %d", mode, sig))
			if res == nil {
				return f
			}
			want := "DONE " // the kernel takes it; the server drops it
			if fault[sig] {
				want = "REFUSED operation not permitted"
			}
			if !strings.HasPrefix(res.Stdout, want) {
				f.add("%s of signal %d: %q (stderr %q), want %q", mode, sig, res.Stdout, res.Stderr, want)
			}
		}
	}
	return f
}

// TestCommandCannotReachServerMemory: serverMemoryAttacks, with the
// seccomp filter (which refuses ptrace itself) and without it.
func TestCommandCannotReachServerMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		relax local.Relax
	}{{"seccomp", local.Relax{}}, {"seccomp relaxed", local.Relax{Seccomp: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.Relax.Seccomp = tc.relax.Seccomp // the rest as testOptions has it
			check(t, serverMemoryAttacks(pid1Session(t, opts)))
		})
	}
}

// serverMemoryAttacks: a command cannot read the server's environment,
// list its descriptors, write its memory or ptrace it (PR_SET_DUMPABLE
// 0), while its own process, dumpable again after execve, reads its own
// environment and /proc entries. s is armed (armAttacker).
func serverMemoryAttacks(s *goruntime.Session) findings {
	var f findings
	for _, mode := range []string{"environ", "fd", "mem", "ptrace"} {
		res := f.attack(s, "/tmp/attack "+mode+" $(pgrep -x server)")
		if res == nil {
			return f
		}
		if !strings.HasPrefix(res.Stdout, "REFUSED ") {
			f.add("%s of the server: %q (stderr %q), want REFUSED", mode, res.Stdout, res.Stderr)
		}
	}
	res := f.mustOK(s, goruntime.Request{Command: "grep -c . /proc/self/environ >/dev/null && ls /proc/self/fd >/dev/null && /tmp/attack environ $$"})
	if res != nil && !strings.HasPrefix(res.Stdout, "DONE ") {
		f.add("a command reading its shell's environ: %q, want DONE", res.Stdout)
	}
	return f
}
