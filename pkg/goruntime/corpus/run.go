package corpus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// Observed is what one run of a case produced, before normalization.
type Observed struct {
	Stdout, Stderr string
	ExitCode       int
	Outcome        goruntime.Outcome
	Duration       time.Duration
	// Go-aware results of a sandbox run (empty for the oracle).
	Diagnostics []goruntime.Diagnostic
	Tests       []goruntime.TestResult
	Benchmarks  []goruntime.Benchmark
}

// HostGoEnv is what the oracle adds to the host's environment, to match
// the go settings of a local sandbox: modules only from the module cache,
// no toolchain switching, no cgo. A case's env may override them.
func HostGoEnv() []string {
	return []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
}

// RunHost is the oracle: it copies c into a fresh directory under tmp and
// runs c.Script there with sh -c, the host's go command, HostGoEnv and
// c.Env (goruntimetest.RunCommand: on timeout the whole process group is
// killed and the exit code is 124, as the runtime server does). It
// returns the directory it ran in, to normalize paths in the output.
func RunHost(ctx context.Context, c Case, tmp string) (Observed, string, error) {
	dir, err := os.MkdirTemp(tmp, c.Name+"-")
	if err != nil {
		return Observed{}, "", fmt.Errorf("oracle %s: %w", c.Name, err)
	}
	for _, f := range c.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Observed{}, "", fmt.Errorf("oracle %s: %w", c.Name, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(p, f.Data, mode); err != nil {
			return Observed{}, "", fmt.Errorf("oracle %s: %w", c.Name, err)
		}
	}

	env := append(os.Environ(), HostGoEnv()...)
	er, err := goruntimetest.RunCommand(ctx, dir, env, goruntime.ExecRequest{Command: c.Script(), Env: c.Env, Timeout: c.Timeout}, nil)
	if err != nil {
		return Observed{}, "", fmt.Errorf("oracle %s: %w", c.Name, err)
	}
	return Observed{
		Stdout:   er.Stdout,
		Stderr:   er.Stderr,
		ExitCode: er.ExitCode,
		Outcome:  goruntime.Classify(c.Script(), er),
		Duration: er.Duration,
	}, dir, nil
}

// RunSession runs c through s: one Execute shipping c's files and running
// c.Script with c.Env and c.Timeout. The caller empties the sandbox first
// (Session.Reset) if it ran an earlier case. s must keep whole outputs
// (goruntime.Options HeadBytes and TailBytes negative): a result with
// elided bytes is an error, since it cannot be compared.
func RunSession(ctx context.Context, s *goruntime.Session, c Case) (Observed, error) {
	res, err := s.Execute(ctx, goruntime.Request{
		Files:   c.Files,
		Command: c.Script(),
		Timeout: c.Timeout,
		Env:     c.Env,
	})
	if err != nil {
		return Observed{}, fmt.Errorf("sandbox %s: %w", c.Name, err)
	}
	if res.StdoutElided > 0 || res.StderrElided > 0 {
		return Observed{}, fmt.Errorf("sandbox %s: the session elided %d+%d output bytes; open it with negative HeadBytes/TailBytes",
			c.Name, res.StdoutElided, res.StderrElided)
	}
	return Observed{
		Stdout:   res.Stdout,
		Stderr:   res.Stderr,
		ExitCode: res.ExitCode,
		Outcome:  res.Outcome,
		Duration: res.Duration,

		Diagnostics: res.Diagnostics,
		Tests:       res.Tests,
		Benchmarks:  res.Benchmarks,
	}, nil
}
