package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func (s *Server) runGoCode(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, RunOutput{}, errors.New(`command is required: a shell command such as "go run ." (to only write files, use "true")`)
	}
	timeout := s.cfg.DefaultTimeout
	if in.TimeoutSeconds != 0 {
		if in.TimeoutSeconds < 0 || math.IsNaN(in.TimeoutSeconds) || math.IsInf(in.TimeoutSeconds, 0) {
			return nil, RunOutput{}, fmt.Errorf("timeout_seconds %v: must be a positive number of seconds", in.TimeoutSeconds)
		}
		if in.TimeoutSeconds > s.cfg.MaxTimeout.Seconds() {
			return nil, RunOutput{}, fmt.Errorf("timeout_seconds %v: at most %s is allowed", in.TimeoutSeconds, secs(s.cfg.MaxTimeout))
		}
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	files := toolFiles(in.Files)
	prog := s.startProgress(ctx, req, timeout)
	defer prog.Stop()
	listen, waited := prog.Listener(), (*waitNote)(nil)
	if listen == nil { // no notification reaches the client: the result says what it waited for
		waited = &waitNote{}
		listen = waited.announce
	}

	var (
		res    *goruntime.Result
		reaped time.Duration
	)
	u, err := s.call(ctx, req, in.SandboxID, needWork, listen, func(sess *goruntime.Session, r time.Duration) error {
		reaped = r
		if s.cfg.Ephemeral {
			if err := sess.Reset(ctx); err != nil {
				return fmt.Errorf("empty /app before the call (--ephemeral): %w", err)
			}
		}
		prog.Say("running " + clip.String(in.Command, 80))
		req := goruntime.Request{Files: files, Command: in.Command, Timeout: timeout, GoVersion: in.GoVersion}
		var err error
		if prog != nil {
			res, err = sess.ExecuteStream(ctx, req, prog.Chunk)
		} else {
			// Nobody listens for progress: skip streaming, which costs a
			// connection per call on some backends.
			res, err = sess.Execute(ctx, req)
		}
		return err
	})
	if err != nil {
		s.failed.log(ctx, "run_go_code", err, "command", clip.String(in.Command, 120))
		return nil, RunOutput{}, describeToolchain(sessions.Describe(err))
	}
	out := RunOutput{
		ExitCode:          res.ExitCode,
		Outcome:           string(res.Outcome),
		Stdout:            res.Stdout,
		Stderr:            res.Stderr,
		DurationMS:        res.Duration.Milliseconds(),
		TimedOut:          res.Outcome == goruntime.OutcomeTimeout,
		StdoutTruncated:   res.StdoutTruncated,
		StderrTruncated:   res.StderrTruncated,
		StdoutElidedBytes: res.StdoutElided,
		StderrElidedBytes: res.StderrElided,
		SandboxID:         u.ID,
		NewSandbox:        reaped > 0,
	}
	out.Diagnostics, out.DiagnosticsLeft = mcpDiagnostics(res.Diagnostics)
	out.Tests, out.TestsLeft = mcpTests(res.Tests)
	text := createdNote(u) + formatRun(out, timeout, reaped)
	if waited != nil {
		text = waited.line() + text
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		// Any outcome but ok is a failed run, also one that exited 0 after
		// running into a sandbox limit (its output or files are cut short).
		IsError: res.Outcome != goruntime.OutcomeOK || res.ExitCode != 0,
	}, out, nil
}

// formatRun renders a run for a model to read: a status line, then each
// stream under a header.
func formatRun(o RunOutput, timeout, reaped time.Duration) string {
	var b strings.Builder
	if reaped > 0 {
		fmt.Fprintf(&b, "note: this session's earlier sandbox was closed after %s idle; this call ran in a fresh one and files from earlier calls are gone\n",
			reaped.Round(time.Second))
	}
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "timeout: killed after %s (exit code %d, %d ms); raise timeout_seconds or look for a hang\n",
			secs(timeout), o.ExitCode, o.DurationMS)
	default:
		fmt.Fprintf(&b, "exit code %d (%s) in %d ms\n", o.ExitCode, o.Outcome, o.DurationMS)
	}
	writeStream(&b, "stdout", o.Stdout, o.StdoutTruncated, o.StdoutElidedBytes)
	writeStream(&b, "stderr", o.Stderr, o.StderrTruncated, o.StderrElidedBytes)
	formatGoAware(&b, o.Diagnostics, o.DiagnosticsLeft, o.Tests, o.TestsLeft)
	return strings.TrimRight(b.String(), "\n")
}

func writeStream(b *strings.Builder, name, s string, truncated bool, elided int) {
	switch {
	case s == "" && !truncated:
		fmt.Fprintf(b, "--- %s: (empty)\n", name)
		return
	case elided > 0:
		fmt.Fprintf(b, "--- %s (truncated: %d bytes left out in the middle) ---\n", name, elided)
	case truncated:
		fmt.Fprintf(b, "--- %s (truncated: the sandbox cut it at its output limit) ---\n", name)
	default:
		fmt.Fprintf(b, "--- %s ---\n", name)
	}
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}
