package goruntimetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// DefaultTimeout is a command's timeout when its request gives none, as
// the runtime server's default.
const DefaultTimeout = 300 * time.Second

// RunCommand runs req.Command with /bin/sh -c in dir, in a process group
// of its own, with env (nil: this process's environment) plus req.Env, as
// the runtime server does: past req.Timeout (DefaultTimeout when zero)
// the group is killed and the exit code is 124 with the output so far; a
// command ended by signal N exits 128+N; what the command left running
// in its group is killed when it ends. A done ctx kills the group and
// returns ctx's error. Bytes of the output that are not UTF-8 become
// U+FFFD, one each, as in the server's answers. started, when not nil, is told the process group
// (for a caller that must kill it early) once the command runs.
func RunCommand(ctx context.Context, dir string, env []string, req goruntime.ExecRequest, started func(pgid int)) (*goruntime.ExecResult, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = dir
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = env
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sh in %s: %w", dir, err)
	}
	pgid := cmd.Process.Pid
	if started != nil {
		started(pgid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	timedOut := false
	select {
	case waitErr = <-done:
	case <-timer.C:
		timedOut = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		waitErr = <-done
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return nil, fmt.Errorf("run %q: %w", req.Command, ctx.Err())
	}
	// Children that outlived sh (a background process) die with the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	res := &goruntime.ExecResult{
		Stdout:   wire.ValidUTF8(stdout.String()),
		Stderr:   wire.ValidUTF8(stderr.String()),
		TimedOut: timedOut,
		Duration: time.Since(start),
	}
	var ee *exec.ExitError
	switch {
	case timedOut:
		res.ExitCode = wire.ExitTimedOut
	case waitErr == nil:
	case !errors.As(waitErr, &ee):
		return nil, fmt.Errorf("wait for sh in %s: %w", dir, waitErr)
	default:
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = wire.SignalExitCode(int(ws.Signal()))
		} else {
			res.ExitCode = ee.ExitCode()
		}
	}
	return res, nil
}
