package agentsandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/contract"
)

// Through the router (ConnectivityRouter, Gateway mode) commands go over
// the legacy contract with the SDK's Run, which sends only {"command"}.
// Our runtime server also reads the additive timeout_seconds and env
// fields and answers with timed_out, duration_ms and truncation flags,
// which the SDK drops. legacyTransport sits under the SDK's HTTP client:
// for a Run carrying a *legacyExec in its context it adds the fields to
// the request body and keeps a copy of the response body.

// maxLegacyResponse is the SDK's own limit on a Run response.
const maxLegacyResponse = 16 << 20

type legacyExecKey struct{}

// legacyExec is one Run's extra fields and, after it, the raw response.
type legacyExec struct {
	req  wire.ExecuteRequest
	body []byte
}

type legacyTransport struct{ next http.RoundTripper }

func (t legacyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ex, ok := r.Context().Value(legacyExecKey{}).(*legacyExec)
	if !ok || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/execute") {
		return t.next.RoundTrip(r)
	}
	body, err := json.Marshal(ex.req)
	if err != nil {
		return nil, fmt.Errorf("encode execute request: %w", err)
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLegacyResponse+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read execute response: %w", err)
	}
	ex.body = data
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// execLegacy runs req through the router with timeout and env as data;
// the answer maps to the result as contract.Result says (the SDK's own
// fields when the full answer was not kept).
func (s *Sandbox) execLegacy(ctx context.Context, req goruntime.ExecRequest) (*goruntime.ExecResult, error) {
	if req.NeedsProcessAPI() {
		return nil, fmt.Errorf("exec in sandbox %s: stdin, signals and a working directory need the sandboxd process API, which connectivity %q does not reach (use port-forward or an in-cluster connectivity)",
			s.id, s.b.opts.Connectivity)
	}
	ex := &legacyExec{req: contract.Request(req)}
	res, err := s.sb.Run(context.WithValue(ctx, legacyExecKey{}, ex), req.Command, callTimeout(req.Timeout)...)
	if err != nil {
		return nil, s.explain("exec", err)
	}
	var full wire.ExecuteResponse
	if ex.body == nil || json.Unmarshal(ex.body, &full) != nil {
		full = wire.ExecuteResponse{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}
	}
	return contract.Result(&full), nil
}
