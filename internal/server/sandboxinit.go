package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp"
)

// Running as the init (PID 1) of a sandbox's pid namespace (--init).
//
// Commands run as the server's uid in the same pid namespace, so as an
// ordinary process the server is theirs to kill, stop, ptrace or read.
// The kernel treats a pid namespace's init differently: a signal sent
// from inside the namespace reaches it only when it has a handler for
// that signal, and SIGKILL and SIGSTOP from inside never do. When init
// exits, the kernel kills every other process of the namespace.
//
// So in init mode the server
//   - holds a handler for every signal whose default would end or stop
//     it (initSignals), and does nothing with them: SIGTERM,
//     SIGINT, SIGQUIT, SIGSEGV from kill(2) and the rest no longer end it.
//     Handlers, unlike SIG_IGN, are reset to SIG_DFL for the commands it
//     starts (execve), so commands get the usual dispositions;
//   - is not dumpable (PR_SET_DUMPABLE 0): a process of the same uid
//     without CAP_SYS_PTRACE cannot ptrace it, read or write its memory
//     (/proc/1/mem), read /proc/1/environ or open its descriptors through
//     /proc/1/fd. Commands get dumpable back when they execve a binary
//     they can read;
//   - refuses, for itself and every command, a fault signal (SIGSEGV,
//     SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSTKFLT, SIGSYS) sent with a
//     forged siginfo (rt_sigqueueinfo, rt_tgsigqueueinfo,
//     pidfd_send_signal with an info argument): the Go runtime takes one
//     for a real fault and crashes, handler or not. A seccomp filter of
//     its own does it (seccomp.ForgedFaultPolicy), so it holds under any
//     outer filter or none; the local backend's policy refuses the same.
//     The filter also refuses every call made through another ABI (i386's
//     int $0x80), which its rules, in this architecture's call numbers,
//     would not see;
//   - ends the sandbox when its lifeline ends (--lifeline-fd).

// initSignals are the signals the server holds a handler for in init
// mode: those whose default in a Go program ends it (os/signal: SIGHUP,
// SIGINT and SIGTERM exit; SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGSTKFLT
// and SIGSYS exit with a stack dump; SIGBUS, SIGFPE and SIGSEGV sent
// with kill(2) crash it), SIGPIPE (which ends it when a write to its
// standard output or error finds the reader gone), and the job-control
// stops the runtime leaves at their default (SIGTSTP, SIGTTIN, SIGTTOU:
// Linux drops them for a pid namespace's init, gVisor does not). Every
// other signal needs no handler of ours: the runtime's own takes it and
// does nothing (SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM,
// SIGWINCH, SIGIO, SIGPWR, the real-time signals; SIGURG and SIGPROF
// are its own), the reaper holds SIGCHLD, and SIGCONT, 32 and 34 are at
// a default that stops nothing or, for a namespace's init, is dropped.
// Each handler costs the start a round trip to the runtime's signal
// thread: the 56 signals once held took 1.6-3 ms of a start, these 16
// 0.4-0.6 ms.
func initSignals() []os.Signal {
	return []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
		syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGPIPE, syscall.SIGTERM, syscall.SIGSTKFLT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGSYS}
}

// becomeInit puts this process in init mode: signals held and dropped
// (logged at debug level) until ctx ends, and the process not dumpable.
func becomeInit(ctx context.Context, guard bool, log *slog.Logger) error {
	if guard && os.Getpid() != 1 {
		return fmt.Errorf("--init-guard: this process is pid %d, not the init (PID 1) of its pid namespace; in a pod, do not share the process namespace (shareProcessNamespace)", os.Getpid())
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	if guard {
		if err := loadInitFilter(seccomp.GuardedInitPolicy); err != nil {
			return fmt.Errorf("--init-guard: load the seccomp filter: %w", err)
		}
	} else if err := loadInitFilter(seccomp.ForgedFaultPolicy); err != nil {
		// Only on a kernel without seccomp filters, where the local
		// backend's own filter (which needs them too) must have been
		// relaxed on purpose.
		log.Warn("sandbox-server: cannot refuse forged fault signals; a command can crash the server with sigqueue(SIGSEGV)", "err", err)
	}
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, initSignals()...)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				log.Debug("signal ignored (init mode)", "signal", s.String())
			}
		}
	}()
	return nil
}

// loadInitFilter installs the policy policy returns on every thread of
// this process (TSYNC); the commands it starts inherit it. It sets
// no_new_privs, which a local sandbox (bubblewrap) and a pod with
// allowPrivilegeEscalation: false have set already. seccomp.Load
// assembles the program itself: go-seccomp-bpf's LoadFilter would
// assemble one that refuses kill(200, SIGKILL) (docs/e2e.md).
func loadInitFilter(policy func() (bpfseccomp.Policy, error)) error {
	p, err := policy()
	if err != nil {
		return err
	}
	return seccomp.Load(p)
}

// lifelineDetach is the line that tells the server to stop watching its
// lifeline (the owner disconnected and leaves the sandbox running).
const lifelineDetach = "detach"

// openLifeline takes descriptor fd as the lifeline: the read end of a
// pipe whose write end only the sandbox's owner holds. It is marked
// close-on-exec at once, so no command inherits it.
func openLifeline(fd int) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("lifeline-fd=%d: %w", fd, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, fmt.Errorf("lifeline-fd=%d: not a pipe", fd)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "lifeline"), nil
}

// watchLifeline reads f until its writer says "detach" (then it closes
// f and returns) or goes away: EOF or a read error calls end, which is
// meant to exit the process and, as PID 1, end the sandbox.
func watchLifeline(f *os.File, log *slog.Logger, end func()) {
	line, err := bufio.NewReader(f).ReadString('\n')
	if err == nil && strings.TrimSpace(line) == lifelineDetach {
		_ = f.Close()
		log.Info("lifeline detached: the sandbox outlives its owner until it is attached and closed")
		return
	}
	log.Info("lifeline closed: the sandbox's owner closed it or exited; ending the sandbox", "read", strings.TrimSpace(line), "err", err)
	end()
}

// shutdownSignals returns the context Serve runs under. Normally SIGTERM
// and SIGINT end it. With cfg.Init, no signal does: the process becomes
// the sandbox's init (becomeInit). With cfg.Lifeline, its end exits the
// process.
func shutdownSignals(ctx context.Context, cfg Config, log *slog.Logger) (context.Context, context.CancelFunc, error) {
	var stop context.CancelFunc
	if cfg.Init {
		ctx, stop = context.WithCancel(ctx)
		if err := becomeInit(ctx, cfg.InitGuard, log); err != nil {
			stop()
			return nil, nil, err
		}
	} else {
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	}
	if cfg.Lifeline != nil {
		go watchLifeline(cfg.Lifeline, log, func() { os.Exit(0) })
	}
	return ctx, stop, nil
}
