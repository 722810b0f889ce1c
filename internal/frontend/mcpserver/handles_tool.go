package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The sandbox handle tools: create_sandbox, delete_sandbox and
// list_sandboxes, over the backend's goruntime.HandleBackend. A handle
// belongs to the caller's principal (principal): the name of the bearer
// token the request carried over HTTP, mcphttp.StdioPrincipal over stdio
// and mcphttp.AnonymousPrincipal over HTTP without auth (every such
// caller shares its handles).

const (
	// defaultHandleTTL is a handle's idle TTL when create_sandbox gives
	// none (capped by Config.MaxTTL).
	defaultHandleTTL = 30 * time.Minute
)

// principal is the identity a call's handles belong to.
func (s *Server) principal(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID
	}
	if req.Extra == nil || req.Extra.Header == nil {
		return mcphttp.StdioPrincipal // no HTTP request: stdio (or an in-memory transport)
	}
	return mcphttp.AnonymousPrincipal
}

// handles returns the backend's handles, or an error saying it has none.
func (s *Server) handles() (goruntime.HandleBackend, error) {
	hb, ok := s.cfg.Backend.(goruntime.HandleBackend)
	if !ok {
		return nil, fmt.Errorf("the %s backend keeps no durable sandboxes (sandbox_id, create_sandbox, list_sandboxes, delete_sandbox): the local and agent-sandbox backends do", s.cfg.Backend.Name())
	}
	return hb, nil
}

// countHandles is how many live handles the backend keeps, of every
// principal (0 without handles).
func (s *Server) countHandles(ctx context.Context) (int, error) {
	hb, ok := s.cfg.Backend.(goruntime.HandleBackend)
	if !ok {
		return 0, nil
	}
	return hb.CountHandles(ctx)
}

// countHandlesOf is how many live handles principal holds in the
// backend (0 without handles).
func (s *Server) countHandlesOf(ctx context.Context, principal string) (int, error) {
	hb, ok := s.cfg.Backend.(goruntime.HandleBackend)
	if !ok {
		return 0, nil
	}
	hs, err := hb.ListHandles(ctx, principal)
	if err != nil {
		return 0, fmt.Errorf("list the handles of %q: %w", principal, err)
	}
	return len(hs), nil
}

// handleTTL is the TTL a create asks for in seconds (0: the default),
// checked against Config.MaxTTL.
func (s *Server) handleTTL(seconds float64) (time.Duration, error) {
	if seconds == 0 {
		return min(defaultHandleTTL, s.cfg.MaxTTL), nil
	}
	if seconds < goruntime.MinHandleTTL.Seconds() || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return 0, fmt.Errorf("ttl_seconds %v: want a number of seconds, at least %g (0 or none for the default)", seconds, goruntime.MinHandleTTL.Seconds())
	}
	if seconds > s.cfg.MaxTTL.Seconds() {
		return 0, fmt.Errorf("ttl_seconds %v: at most %g is allowed (--max-ttl)", seconds, s.cfg.MaxTTL.Seconds())
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// create makes a handle of the caller's principal and returns it and its
// sandbox, attached (the caller releases it).
func (s *Server) create(ctx context.Context, req *mcp.CallToolRequest, spec goruntime.HandleSpec) (goruntime.Handle, goruntime.Sandbox, error) {
	hb, err := s.handles()
	if err != nil {
		return goruntime.Handle{}, nil, err
	}
	owner := s.principal(req)
	// Room in both bounds (--max-sandboxes, --max-sandboxes-per-principal),
	// held while the handle is made; from then the backend counts it.
	done, err := s.pool.Reserve(ctx, owner)
	if err != nil {
		return goruntime.Handle{}, nil, s.explainLimit(err)
	}
	defer done()
	octx, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout)
	defer cancel()
	start := time.Now()
	h, sb, err := hb.CreateHandle(octx, owner, spec)
	s.metrics.opened(time.Since(start), err)
	if err != nil {
		return goruntime.Handle{}, nil, describeSnapshot(describeHandle(err))
	}
	s.log.Info("sandbox handle created", "sandbox_id", h.ID, "principal", owner, "ttl", spec.TTL, "from_snapshot", spec.FromSnapshot)
	return h, sb, nil
}

// createForCall makes a handle for a stateless server's call without
// sandbox_id, runs fn in it and releases it; a handle whose call failed
// is deleted (dropUnnamed).
func (s *Server) createForCall(ctx context.Context, req *mcp.CallToolRequest, fn func(*goruntime.Session, time.Duration) error) (used, error) {
	ttl := min(defaultHandleTTL, s.cfg.MaxTTL)
	h, sb, err := s.create(ctx, req, goruntime.HandleSpec{TTL: ttl, Labels: map[string]string{"created-by": req.Params.Name}})
	if err != nil {
		return used{}, err
	}
	err = fn(goruntime.NewSession(sb, s.cfg.Session), 0)
	s.release(ctx, sb)
	if err != nil {
		// A failed call's result names no sandbox (refused input, which
		// the Session checks only now, or a backend error): nobody could
		// reach the handle, so it ends now rather than after its TTL.
		s.dropUnnamed(ctx, req, h.ID)
		return used{}, err
	}
	return used{ID: h.ID, Created: true, TTL: ttl}, nil
}

// dropUnnamed deletes the handle id a failed call made.
func (s *Server) dropUnnamed(ctx context.Context, req *mcp.CallToolRequest, id string) {
	hb, err := s.handles()
	if err == nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = hb.DeleteHandle(dctx, s.principal(req), id)
	}
	if err != nil {
		s.log.Warn("delete the sandbox handle of a failed call", "sandbox_id", id, "err", err)
	}
}

// createdNote is the line a result gets when its call made a handle.
func createdNote(u used) string {
	if !u.Created {
		return ""
	}
	return fmt.Sprintf("note: this call ran in a new sandbox, sandbox_id %q (the server is stateless): pass sandbox_id to keep using its files and build cache; it ends after %s without a call, or with delete_sandbox\n",
		u.ID, u.TTL.Round(time.Second))
}

// CreateInput is create_sandbox's input.
type CreateInput struct {
	TTLSeconds float64           `json:"ttl_seconds,omitempty" jsonschema:"end the sandbox after this many seconds without a call using it (at least 1); 0 or absent: the default"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"your own key/value labels, listed by list_sandboxes (at most 16; keys and values up to 63 of a-z A-Z 0-9 - _ .)"`
	// FromSnapshot starts the sandbox from a snapshot (snapshot_tool.go).
	FromSnapshot string `json:"from_snapshot,omitempty" jsonschema:"start with the files of this snapshot of yours (from snapshot_sandbox): /app, the Go module and build caches; absent: an empty sandbox"`
}

// SandboxInfo describes one of the caller's sandboxes.
type SandboxInfo struct {
	SandboxID   string            `json:"sandbox_id" jsonschema:"pass it as sandbox_id to the other tools"`
	Labels      map[string]string `json:"labels"`
	TTLSeconds  float64           `json:"ttl_seconds" jsonschema:"idle time after which it ends"`
	Created     string            `json:"created" jsonschema:"RFC 3339, UTC"`
	LastUsed    string            `json:"last_used" jsonschema:"RFC 3339, UTC: the end of the latest call that used it"`
	IdleSeconds float64           `json:"idle_seconds"`
	ExpiresAt   string            `json:"expires_at" jsonschema:"RFC 3339, UTC: when it ends unless a call uses it first"`
}

func sandboxInfo(h goruntime.Handle, now time.Time) SandboxInfo {
	labels := maps.Clone(h.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return SandboxInfo{SandboxID: h.ID, Labels: labels, TTLSeconds: h.TTL.Seconds(),
		Created: h.Created.UTC().Format(time.RFC3339), LastUsed: h.LastUsed.UTC().Format(time.RFC3339),
		IdleSeconds: math.Round(max(now.Sub(h.LastUsed), 0).Seconds()), ExpiresAt: h.Expires.UTC().Format(time.RFC3339)}
}

// DeleteInput is delete_sandbox's input.
type DeleteInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox to end, as create_sandbox returned it"`
}

// DeleteOutput is delete_sandbox's result.
type DeleteOutput struct {
	SandboxID string `json:"sandbox_id"`
	Deleted   bool   `json:"deleted"`
}

// ListSandboxesOutput is list_sandboxes's result.
type ListSandboxesOutput struct {
	Sandboxes []SandboxInfo `json:"sandboxes" jsonschema:"your sandboxes, oldest first"`
}

func (s *Server) createSandbox(ctx context.Context, req *mcp.CallToolRequest, in CreateInput) (*mcp.CallToolResult, SandboxInfo, error) {
	ttl, err := s.handleTTL(in.TTLSeconds)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	if err := goruntime.CheckLabels(in.Labels); err != nil {
		return nil, SandboxInfo{}, err
	}
	if in.FromSnapshot != "" {
		if _, err := s.snapshots(); err != nil {
			return nil, SandboxInfo{}, err
		}
	}
	h, sb, err := s.create(ctx, req, goruntime.HandleSpec{TTL: ttl, Labels: in.Labels, FromSnapshot: in.FromSnapshot})
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	s.release(ctx, sb)
	out := sandboxInfo(h, time.Now())
	text := fmt.Sprintf("sandbox_id: %s\nPass it as sandbox_id to run_go_code, check_go_code, read_file, list_files and reset_sandbox. Its files and build cache stay until delete_sandbox, or until %s pass without a call using it.",
		h.ID, ttl.Round(time.Second))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

func (s *Server) deleteSandbox(ctx context.Context, req *mcp.CallToolRequest, in DeleteInput) (*mcp.CallToolResult, DeleteOutput, error) {
	if in.SandboxID == "" {
		return nil, DeleteOutput{}, errors.New("sandbox_id is required (list_sandboxes lists yours)")
	}
	hb, err := s.handles()
	if err != nil {
		return nil, DeleteOutput{}, err
	}
	if err := hb.DeleteHandle(ctx, s.principal(req), in.SandboxID); err != nil {
		return nil, DeleteOutput{}, describeHandle(err)
	}
	s.log.Info("sandbox handle deleted", "sandbox_id", in.SandboxID, "principal", s.principal(req))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted sandbox " + in.SandboxID}}},
		DeleteOutput{SandboxID: in.SandboxID, Deleted: true}, nil
}

func (s *Server) listSandboxes(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ListSandboxesOutput, error) {
	hb, err := s.handles()
	if err != nil {
		return nil, ListSandboxesOutput{}, err
	}
	hs, err := hb.ListHandles(ctx, s.principal(req))
	if err != nil {
		return nil, ListSandboxesOutput{}, err
	}
	now := time.Now()
	out := ListSandboxesOutput{Sandboxes: []SandboxInfo{}}
	var b strings.Builder
	for _, h := range hs {
		info := sandboxInfo(h, now)
		out.Sandboxes = append(out.Sandboxes, info)
		keys := slices.Sorted(maps.Keys(h.Labels))
		var ls []string
		for _, k := range keys {
			ls = append(ls, k+"="+h.Labels[k])
		}
		fmt.Fprintf(&b, "%s  idle %s of %s  labels [%s]\n", h.ID, time.Duration(info.IdleSeconds)*time.Second, h.TTL.Round(time.Second), strings.Join(ls, " "))
	}
	if len(hs) == 0 {
		b.WriteString("no sandboxes: create_sandbox makes one\n")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, out, nil
}

// addHandleTools registers create_sandbox, delete_sandbox and list_sandboxes.
func (s *Server) addHandleTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  "create_sandbox",
		Title: "Create a sandbox",
		Description: fmt.Sprintf("Create a sandbox of your own that outlives this connection and returns its sandbox_id; pass sandbox_id to the other tools to work in it. It keeps its files and Go build cache until delete_sandbox, or until ttl_seconds (default %g, at most %g) pass without a call using it. from_snapshot starts it with a snapshot's files (snapshot_sandbox).",
			min(defaultHandleTTL, s.cfg.MaxTTL).Seconds(), s.cfg.MaxTTL.Seconds()),
		Annotations: &mcp.ToolAnnotations{Title: "Create a sandbox", OpenWorldHint: ptr(false)},
	}, s.createSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "delete_sandbox",
		Title:       "Delete a sandbox",
		Description: "End a sandbox create_sandbox made, and everything in it.",
		Annotations: &mcp.ToolAnnotations{Title: "Delete a sandbox", DestructiveHint: ptr(true), IdempotentHint: false, OpenWorldHint: ptr(false)},
	}, s.deleteSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_sandboxes",
		Title:       "List your sandboxes",
		Description: "List the sandboxes you created (sandbox_id, labels, created, idle time, when each ends if unused).",
		InputSchema: &jsonschema.Schema{Type: "object"},
		Annotations: &mcp.ToolAnnotations{Title: "List your sandboxes", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.listSandboxes)
}
