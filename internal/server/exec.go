package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

var (
	errDeadline = errors.New("command deadline passed")
	errShutdown = errors.New("server shutting down")
)

// execSpec is one command to run, validated.
type execSpec struct {
	command string
	timeout time.Duration
	env     map[string]string
}

// procStarter starts a command so that the orphan reaper never takes its
// exit status, and is told once the command has been waited for.
type procStarter interface {
	Start(cmd *exec.Cmd) error
	Done(pid int)
}

// scriptFile writes command to a new private file (mode 0600) in the
// server's temporary directory ($TMPDIR, else /tmp), outside the base
// directory so that file listings never show it, and returns its name.
// The caller removes it.
func scriptFile(command string) (string, error) {
	f, err := os.CreateTemp("", "sandbox-command-*.sh")
	if err != nil {
		return "", fmt.Errorf("create command file: %w", err)
	}
	_, werr := f.WriteString(command)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write command file %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// run runs spec with /bin/sh -c in the base directory (a command over
// shell.MaxArgBytes, the longest one argument may be: /bin/sh <script
// file>, the file removed after the run), as the leader of a new process group. When ctx ends (client gone, server shutting down) or
// the deadline passes, the whole group is killed with SIGKILL; output
// written before that is kept. The error is non-nil only when the command
// could not be started.
func (s *Server) run(ctx context.Context, spec execSpec) (*wire.ExecuteResponse, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, spec.timeout, errDeadline)
	defer cancel()

	stdout := &capture{limit: s.cfg.MaxOutputBytes}
	stderr := &capture{limit: s.cfg.MaxOutputBytes}
	args := []string{"-c", spec.command}
	if len(spec.command) > shell.MaxArgBytes {
		script, err := scriptFile(spec.command)
		if err != nil {
			return nil, err
		}
		defer os.Remove(script)
		args = []string{script}
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", args...)
	cmd.Dir = s.root().Dir()
	cmd.Env = slices.Clip(s.env) // appends below copy, never touching s.env
	for k, v := range spec.env {
		cmd.Env = append(cmd.Env, k+"="+v) // later entries win
	}
	outPipe, err := newOutputPipe(stdout)
	if err != nil {
		return nil, err
	}
	errPipe, err := newOutputPipe(stderr)
	if err != nil {
		outPipe.abandon()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outPipe.w, errPipe.w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The leader's pid is its process group's id.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = pipeGrace // after Cancel: kill the leader itself if the group kill missed it

	start := time.Now()
	if err := s.procs.Start(cmd); err != nil {
		outPipe.abandon()
		errPipe.abandon()
		return nil, fmt.Errorf("start /bin/sh: %w", err)
	}
	outPipe.started()
	errPipe.started()
	oomFirst(cmd.Process.Pid)
	waitErr := cmd.Wait()
	s.procs.Done(cmd.Process.Pid)
	elapsed := time.Since(start)
	grace := time.Now().Add(pipeGrace)
	outPipe.finish(grace)
	errPipe.finish(grace)

	res := &wire.ExecuteResponse{DurationMS: float64(elapsed.Microseconds()) / 1000, CPUMS: cpuMS(cmd.ProcessState)}
	var note string
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, errDeadline) && ws.Signaled():
		res.ExitCode = wire.ExitTimedOut
		res.TimedOut = true
		note = fmt.Sprintf("[sandbox-server: command timed out after %s; its process group was killed]", spec.timeout)
	case ws.Signaled():
		sig := ws.Signal()
		res.Signal = int(sig)
		res.ExitCode = wire.SignalExitCode(int(sig))
		why := ""
		if ctx.Err() != nil {
			why = fmt.Sprintf(" (%v)", cause)
		}
		note = fmt.Sprintf("[sandbox-server: command killed by signal %d (%s)%s]", int(sig), sig, why)
	case cmd.ProcessState != nil:
		res.ExitCode = cmd.ProcessState.ExitCode()
	default:
		return nil, fmt.Errorf("wait /bin/sh: %w", waitErr)
	}
	res.Stdout, res.StdoutTruncated = stdout.render("stdout", s.cfg.MaxOutputBytes)
	res.Stderr, res.StderrTruncated = stderr.render("stderr", s.cfg.MaxOutputBytes-len(note)-8)
	if note != "" {
		if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
			res.Stderr += "\n"
		}
		res.Stderr += note + "\n"
	}
	return res, nil
}

// cpuMS is the user and system CPU time of a waited-for command and of the
// descendants it waited for itself (wait4's rusage), in milliseconds; 0
// when not known.
func cpuMS(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return float64((ps.UserTime() + ps.SystemTime()).Microseconds()) / 1000
}

// commandOOMScoreAdj is the oom_score_adj every command starts with: the
// OOM killer's first choice, so that a memory bomb (even one of many small
// processes) kills the command's processes, never the server, which is
// then the largest single process in its memory cgroup. Raising the value
// needs no privilege, unlike shielding the server with a negative one
// (CAP_SYS_RESOURCE, which containers often lack); a command may lower
// its own value back to the server's, not below.
const commandOOMScoreAdj = 1000

// oomFirst sets a started command's oom_score_adj to commandOOMScoreAdj.
// Errors (no writable /proc, the process already gone) are ignored: the
// command then keeps the server's value.
func oomFirst(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(commandOOMScoreAdj)), 0o644)
}
