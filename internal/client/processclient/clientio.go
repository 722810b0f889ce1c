package processclient

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Linux refuses any single argv or environment string over 128 KiB
// (MAX_ARG_STRLEN) and all of them together over a quarter of the stack
// limit (2 MiB with the usual 8 MiB). A command longer than
// shell.MaxArgBytes is therefore passed in pieces of that size, each in
// its own environment variable, and joined again by the shell:
// /bin/sh -c 'eval "unset ...; $P0$P1..."'.
const (
	// MaxCommandBytes is the longest command Exec runs; longer ones are
	// refused with an error wrapping goruntime.ErrTooLarge (write a long
	// script to a file and run that instead).
	MaxCommandBytes = 1536 << 10
	// stdinChunk is the most one WriteStdin call carries.
	stdinChunk = 32 << 10
	// cmdVarPrefix names the variables that carry a long command's pieces;
	// they are unset before the command runs.
	cmdVarPrefix = "GORUNTIME_CMD_PART_"
)

// processConfig turns req, which has passed ExecRequest.Validate where it
// entered the backend, into a ProcessConfig: the command for /bin/sh -c
// (split into environment pieces when long), env and working directory
// as data. Errors name the bad field.
func processConfig(req goruntime.ExecRequest) (*processv1.ProcessConfig, error) {
	if len(req.Command) > MaxCommandBytes {
		return nil, fmt.Errorf("command is %d bytes, over the process API's limit of %d (Linux caps a command's arguments and environment at 2 MiB together); write a long script to a file and run that file: %w",
			len(req.Command), MaxCommandBytes, goruntime.ErrTooLarge)
	}
	env := make(map[string]string, len(req.Env))
	for k, v := range req.Env {
		if strings.HasPrefix(k, cmdVarPrefix) {
			return nil, fmt.Errorf("environment variable name %q: the prefix %s is reserved", k, cmdVarPrefix)
		}
		env[k] = v
	}
	cfg := &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", req.Command}, EnvVars: env}
	if len(req.Command) > shell.MaxArgBytes {
		var names, refs []string
		for i := 0; len(req.Command) > 0; i++ {
			n := min(shell.MaxArgBytes, len(req.Command))
			name := cmdVarPrefix + strconv.Itoa(i)
			env[name] = req.Command[:n]
			req.Command = req.Command[n:]
			names = append(names, name)
			refs = append(refs, "$"+name)
		}
		// The double-quoted argument is expanded before eval runs, so the
		// pieces are gone from the command's environment and variables.
		script := `eval "unset ` + strings.Join(names, " ") + `; ` + strings.Join(refs, "") + `"`
		cfg.Command = []string{"/bin/sh", "-c", script}
	}
	if req.Dir != "" && req.Dir != "." {
		dir := path.Clean(req.Dir)
		cfg.Cwd = &dir
	}
	return cfg, nil
}

// closeStdin sends EOF to the process's stdin. A process that is gone
// (NotFound), or whose stdin is closed already, is fine: sandboxd's server
// answers Internal "failed to close stdin: close |1: file already closed"
// when the command exited and its stdin pipe was closed before the
// registry let go of it, which a quick command (tar of one file) hits.
func closeStdin(ctx context.Context, client processv1.ProcessServiceClient, pid int32) error {
	_, err := client.WriteStdin(ctx, &processv1.WriteStdinRequest{
		ProcessId: pid,
		Payload:   &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}},
	})
	if err == nil || status.Code(err) == codes.NotFound ||
		(status.Code(err) == codes.Internal && strings.Contains(status.Convert(err).Message(), os.ErrClosed.Error())) {
		return nil
	}
	return rpcError("close stdin", err)
}

// feedStdin copies r to the process's stdin, then closes it. It stops
// quietly when the process is gone or ctx ends (the command's result says
// what happened to it).
func feedStdin(ctx context.Context, client processv1.ProcessServiceClient, pid int32, r io.Reader) {
	buf := make([]byte, stdinChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := client.WriteStdin(ctx, &processv1.WriteStdinRequest{
				ProcessId: pid,
				Payload:   &processv1.WriteStdinRequest_Input{Input: append([]byte(nil), buf[:n]...)},
			}); werr != nil {
				return
			}
		}
		if err != nil {
			_ = closeStdin(ctx, client, pid)
			return
		}
	}
}

// forwardSignals sends each signal from sigs to the process until ctx ends.
func forwardSignals(ctx context.Context, client processv1.ProcessServiceClient, pid int32, sigs <-chan syscall.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-sigs:
			if !ok {
				return
			}
			var ps processv1.Signal
			switch sig {
			case syscall.SIGINT:
				ps = processv1.Signal_SIGNAL_SIGINT
			case syscall.SIGTERM:
				ps = processv1.Signal_SIGNAL_SIGTERM
			case syscall.SIGKILL:
				ps = processv1.Signal_SIGNAL_SIGKILL
			default:
				continue // only these three exist in the protocol
			}
			_, _ = client.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: ps})
		}
	}
}
