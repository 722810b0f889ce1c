package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/apierror"
)

// Request is the /execute body of r: its command, env and timeout (none
// when r has none: the server's default applies). Stdin, Signals and Dir
// have no place in it (r.NeedsProcessAPI).
func Request(r goruntime.ExecRequest) wire.ExecuteRequest {
	body := wire.ExecuteRequest{Command: r.Command, Env: r.Env}
	if r.Timeout > 0 {
		// The server refuses 0; a timeout under a millisecond is one.
		body.TimeoutSeconds = math.Max(r.Timeout.Seconds(), 0.001)
	}
	return body
}

// Result is the ExecResult of an /execute answer, the one mapping every
// backend uses: output, exit code, truncation and timeout as the server
// reported them, Duration from its duration_ms and CPU from its cpu_ms
// (each zero when it sent none),
// and Limit LimitOutput when it cut a stream. The backend adds what only
// it can tell (the other limits).
func Result(resp *wire.ExecuteResponse) *goruntime.ExecResult {
	res := &goruntime.ExecResult{
		Stdout:          resp.Stdout,
		Stderr:          resp.Stderr,
		ExitCode:        resp.ExitCode,
		StdoutTruncated: resp.StdoutTruncated,
		StderrTruncated: resp.StderrTruncated,
		TimedOut:        resp.TimedOut,
		Duration:        time.Duration(resp.DurationMS * float64(time.Millisecond)),
		CPU:             time.Duration(resp.CPUMS * float64(time.Millisecond)),
	}
	if res.StdoutTruncated || res.StderrTruncated {
		res.Limit = goruntime.LimitOutput
	}
	return res
}

// Exec runs r.Command with POST /execute and returns its result
// (Result). It does not refuse a request that needs the process API:
// the caller does (r.NeedsProcessAPI). A command that exits non-zero is
// not an error; errors are the server's refusal (wrapping the goruntime
// sentinel it names), a transport failure, or an answer over its bound.
func (c *Client) Exec(ctx context.Context, r goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	return c.runCommand(ctx, "/execute", Request(r), func(resp *http.Response) error {
		return statusError("execute", resp)
	})
}

// UnpackExec writes the files of archive (a tar as WriteArchive makes
// it, at most wire.MaxInlineArchiveBytes) and runs r.Command in one
// request, POST wire.UnpackExecutePath, and returns the command's result
// (Result). When the files were not all written the command did not
// run: the error is a *goruntime.FilesError holding what Unpack would
// have returned. A server without the route answers 404 without an
// error code: errors.ErrUnsupported (send the files with Unpack, then
// Exec).
func (c *Client) UnpackExec(ctx context.Context, archive []byte, r goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	body := wire.UnpackExecuteRequest{ExecuteRequest: Request(r), Archive: archive}
	return c.runCommand(ctx, wire.UnpackExecutePath, body, func(resp *http.Response) error {
		if resp.StatusCode == http.StatusUnprocessableEntity { // the command's request, as /execute refuses it
			return statusError("execute", resp)
		}
		answer := errorBody(resp)
		if apierror.NoRoute(resp.StatusCode, answer) {
			return fmt.Errorf("unpack and execute: the runtime server has no %s: %w", wire.UnpackExecutePath, errors.ErrUnsupported)
		}
		return &goruntime.FilesError{Err: answerError("unpack", resp, answer)}
	})
}

// runCommand posts body (JSON) to path, a route that runs a command and
// answers /execute's result, and returns that result (Result); refused
// turns an answer other than 200 into the error.
func (c *Client) runCommand(ctx context.Context, path string, body any, refused func(*http.Response) error) (*goruntime.ExecResult, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode execute request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err // the caller names the call and the sandbox
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, refused(resp)
	}
	var out wire.ExecuteResponse
	if err := json.NewDecoder(bounded(resp.Body, c.maxAnswer)).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode execute response: %w", err)
	}
	return Result(&out), nil
}
