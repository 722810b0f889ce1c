package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timing of the process API companion.
const (
	// companionStopTimeout is how long the companion gets between SIGTERM
	// and SIGKILL when the server stops (its own shutdown takes up to
	// processapi.DefaultShutdownTimeout, 10 s).
	companionStopTimeout = 12 * time.Second
	// companionRestartDelay is the least time between two starts, so a
	// companion that dies at once cannot spin the server.
	companionRestartDelay = 200 * time.Millisecond
	// eventsDrainTimeout bounds reading the events a companion wrote
	// before it exited.
	eventsDrainTimeout = 2 * time.Second
	// refuseTimeout bounds reading the request of a REST connection that
	// is answered 503 because the companion cannot run.
	refuseTimeout = 2 * time.Second
	// stderrDrain bounds copying the companion's last log lines once it
	// has exited (processAPIHost.stderr).
	stderrDrain = 2 * time.Second
)

// processAPIHost keeps the process API's listeners in the lean server and
// runs the companion binary (cmd/sandbox-processapi) only while a client
// uses them. It polls the listeners without accepting; when a connection
// is pending it starts the companion with the listeners as inherited file
// descriptors, and the companion accepts that connection and every later
// one. When the companion exits (a crash, killed by a command) the server
// polls again and starts a new one on the next connection. The companion
// dies with the server (SIGKILL as its parent-death signal, from a thread
// locked for its lifetime) and is stopped with SIGTERM when the server
// stops. Its pid is registered with the reaper, which therefore never
// collects its exit status.
type processAPIHost struct {
	bin   string
	args  []string // flags before the descriptor flags
	env   []string // the companion's environment, which commands inherit
	procs procStarter
	mets  *metrics
	log   *slog.Logger
	// stderr receives the companion's logs; nil: this process's stderr.
	// Any other writer than an *os.File is fed through a pipe that Wait
	// drains for at most stderrDrain once the companion has exited.
	stderr io.Writer
	lns    []listenerFile
	// companion, when set, holds the running companion's pid (0: none),
	// which a snapshot does not count as a process a command left.
	companion *atomic.Int64

	wakeR, wakeW *os.File // a byte on wakeW ends a poll: the server stops
	cancel       context.CancelFunc
	done         chan struct{}
}

func (h *processAPIHost) start(ctx context.Context) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandboxd: wake pipe: %w", err)
	}
	h.wakeR, h.wakeW = r, w
	ctx, h.cancel = context.WithCancel(ctx)
	h.done = make(chan struct{})
	go h.run(ctx)
	return nil
}

// Close stops the companion (SIGTERM, SIGKILL after companionStopTimeout)
// and closes the listeners.
func (h *processAPIHost) Close() error {
	h.cancel()
	<-h.done
	h.closeListeners()
	_ = h.wakeR.Close()
	_ = h.wakeW.Close()
	return nil
}

func (h *processAPIHost) run(ctx context.Context) {
	defer close(h.done)
	stopWake := context.AfterFunc(ctx, func() { _, _ = h.wakeW.Write([]byte{0}) })
	defer stopWake()
	for {
		if err := h.waitPending(ctx); err != nil {
			if ctx.Err() == nil {
				h.log.Error("sandboxd: poll listeners; the process API is off until the server restarts", "err", err)
			}
			return
		}
		began := time.Now()
		started, err := h.serveOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		var ee *exec.ExitError
		switch {
		case !started:
			h.log.Error("sandboxd: cannot start the process API companion", "bin", h.bin, "err", err)
			h.refusePending(fmt.Sprintf("process API companion %s cannot start: %v", h.bin, err))
		case errors.As(err, &ee) && ee.Exited() && ee.ExitCode() != 0:
			// Its own failure (bad flags, a listener it cannot use):
			// a restart would fail the same way.
			h.log.Error("sandboxd: process API companion failed", "bin", h.bin, "status", exitStatus(err))
			h.refusePending(fmt.Sprintf("process API companion %s failed: %s (see the server's log)", h.bin, exitStatus(err)))
		default:
			h.log.Warn("sandboxd: process API companion exited; it restarts on the next connection",
				"status", exitStatus(err), "ran_s", time.Since(began).Seconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(companionRestartDelay):
		}
	}
}

// waitPending blocks until a listener has a connection waiting to be
// accepted (nil) or ctx ends (ctx's error).
func (h *processAPIHost) waitPending(ctx context.Context) error {
	fds := make([]unix.PollFd, 0, len(h.lns)+1)
	for _, l := range h.lns {
		fds = append(fds, unix.PollFd{Fd: int32(l.file.Fd()), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(h.wakeR.Fd()), Events: unix.POLLIN})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, p := range fds[:len(h.lns)] {
			if p.Revents&unix.POLLIN != 0 {
				return nil
			}
			if p.Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return fmt.Errorf("poll: listener descriptor %d: revents %#x", p.Fd, p.Revents)
			}
		}
	}
}

// serveOnce runs the companion until it exits or ctx ends. started is
// false when it could not be started at all.
func (h *processAPIHost) serveOnce(ctx context.Context) (started bool, err error) {
	er, ew, err := os.Pipe()
	if err != nil {
		return false, fmt.Errorf("events pipe: %w", err)
	}
	defer er.Close()
	args := slices.Clone(h.args)
	var files []*os.File
	for _, l := range h.lns {
		args = append(args, l.flag, strconv.Itoa(3+len(files)))
		files = append(files, l.file)
	}
	args = append(args, "--events-fd", strconv.Itoa(3+len(files)))
	files = append(files, ew)
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	cmd.Stderr, cmd.WaitDelay = h.stderr, stderrDrain
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.ExtraFiles = files
	// The parent-death signal follows the thread that forks: keep this
	// goroutine on it until the companion is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = h.procs.Start(cmd)
	_ = ew.Close()
	if err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	defer h.procs.Done(pid)
	if h.companion != nil {
		h.companion.Store(int64(pid))
		defer h.companion.Store(0)
	}
	h.log.Info("sandboxd: process API companion started", "pid", pid, "bin", h.bin)
	events := make(chan struct{})
	go func() {
		defer close(events)
		h.mets.observeProcessEvents(er, h.log)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(companionStopTimeout)
		select {
		case err = <-waited:
		case <-t.C:
			h.log.Warn("sandboxd: process API companion ignored SIGTERM; killing it", "pid", pid)
			_ = cmd.Process.Kill()
			err = <-waited
		}
		t.Stop()
	}
	select {
	case <-events:
	case <-time.After(eventsDrainTimeout): // a descendant kept the pipe open
	}
	return true, err
}

// refusePending accepts the connections waiting on every listener and
// closes them, answering REST requests 503 with msg, so that a client of
// a companion that cannot run gets an error at once rather than a hang.
func (h *processAPIHost) refusePending(msg string) {
	for _, l := range h.lns {
		fd := int(l.file.Fd())
		if err := unix.SetNonblock(fd, true); err != nil {
			continue
		}
		for range 64 {
			nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
			if err != nil {
				break
			}
			f := os.NewFile(uintptr(nfd), "refused")
			conn, err := net.FileConn(f)
			_ = f.Close()
			if err != nil {
				continue
			}
			go refuse(conn, l.rest, msg)
		}
	}
}

// refuse closes conn, after answering its HTTP request 503 with msg when
// rest is set.
func refuse(conn net.Conn, rest bool, msg string) {
	defer conn.Close()
	if !rest {
		return
	}
	_ = conn.SetDeadline(time.Now().Add(refuseTimeout))
	if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	}
	body := fmt.Sprintf("{\"error\":%q}\n", msg)
	_, _ = fmt.Fprintf(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// exitStatus is how a companion run ended, for the log.
func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
