package agentsandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

var _ goruntime.InspectableSandbox = (*Sandbox)(nil)

// maxInspectBody bounds a /v1/health or /v1/metadata answer.
const maxInspectBody = 1 << 20

// Health asks the pod's sandboxd REST API (GET /v1/health), reached like
// commands (Options.Connectivity). With ConnectivityRouter it is refused:
// the router path has no health endpoint beyond readiness.
func (s *Sandbox) Health(ctx context.Context) (*goruntime.Health, error) {
	var body struct {
		Status        string `json:"status"`
		UptimeSeconds int64  `json:"uptime_seconds"`
	}
	if err := s.restGet(ctx, "/v1/health", &body); err != nil {
		return nil, err
	}
	return &goruntime.Health{Status: body.Status, Uptime: time.Duration(body.UptimeSeconds) * time.Second}, nil
}

// Metadata asks the pod's sandboxd REST API (GET /v1/metadata).
func (s *Sandbox) Metadata(ctx context.Context) (*goruntime.Metadata, error) {
	var body struct {
		Env map[string]string `json:"env"`
	}
	if err := s.restGet(ctx, "/v1/metadata", &body); err != nil {
		return nil, err
	}
	if body.Env == nil {
		body.Env = map[string]string{}
	}
	return &goruntime.Metadata{Env: body.Env}, nil
}

func (s *Sandbox) restGet(ctx context.Context, path string, into any) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.proc == nil {
		return fmt.Errorf("GET %s of sandbox %s: needs the sandboxd REST API, which connectivity %q does not reach", path, s.id, s.b.opts.Connectivity)
	}
	_, base, err := s.proc.client(ctx)
	if err != nil {
		return fmt.Errorf("GET %s of sandbox %s: %w", path, s.id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("GET %s of sandbox %s: %w", path, s.id, err)
		}
		return fmt.Errorf("GET %s of sandbox %s: %w: %w", path, s.id, goruntime.ErrSandboxGone, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInspectBody))
	if err != nil {
		return fmt.Errorf("GET %s of sandbox %s: %w", path, s.id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s of sandbox %s: status %d: %s", path, s.id, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("GET %s of sandbox %s: decode: %w", path, s.id, err)
	}
	return nil
}
