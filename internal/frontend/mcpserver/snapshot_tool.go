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

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The snapshot tools: snapshot_sandbox, fork_sandbox, restore_sandbox,
// list_snapshots and delete_snapshot (and create_sandbox's
// from_snapshot), over the backend's goruntime.SnapshotBackend. A
// snapshot belongs to the caller's principal, as a handle does; another
// principal's snapshot_id answers as a missing one. Forks are sandbox
// handles of the caller's (create_sandbox's), each counted against the
// sandbox bounds like one create_sandbox.

// defaultSnapshotTTL is a snapshot's TTL when snapshot_sandbox gives none
// (capped by Config.MaxTTL).
const defaultSnapshotTTL = 24 * time.Hour

// snapshots returns the backend's snapshots, or an error saying it has
// none.
func (s *Server) snapshots() (goruntime.SnapshotBackend, error) {
	sb, ok := s.cfg.Backend.(goruntime.SnapshotBackend)
	if !ok {
		return nil, fmt.Errorf("the %s backend keeps no snapshots (snapshot_sandbox, fork_sandbox, restore_sandbox, from_snapshot): the local and agent-sandbox backends do", s.cfg.Backend.Name())
	}
	return sb, nil
}

// describeSnapshot turns a snapshot error into one a model can act on. A
// missing ID and another principal's read the same.
func describeSnapshot(err error) error {
	switch {
	case errors.Is(err, goruntime.ErrSnapshotNotFound):
		return fmt.Errorf("%w: no snapshot of yours has this snapshot_id (it was deleted, expired, or never existed); list_snapshots lists yours, snapshot_sandbox takes one", err)
	case errors.Is(err, goruntime.ErrSandboxBusy):
		return fmt.Errorf("%w; a snapshot holds files only and is taken while nothing runs: wait for the running command (or end what a command left running, e.g. a server started with &), then try again", err)
	case errors.Is(err, goruntime.ErrSnapshotQuota):
		return fmt.Errorf("%w; delete_snapshot the ones you no longer need (list_snapshots lists yours)", err)
	}
	return err
}

// snapshotTTL is the TTL a snapshot asks for in seconds (0: the default),
// checked against Config.MaxTTL.
func (s *Server) snapshotTTL(seconds float64) (time.Duration, error) {
	if seconds == 0 {
		return min(defaultSnapshotTTL, s.cfg.MaxTTL), nil
	}
	if seconds < goruntime.MinHandleTTL.Seconds() || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return 0, fmt.Errorf("ttl_seconds %v: want a number of seconds, at least %g (0 or none for the default)", seconds, goruntime.MinHandleTTL.Seconds())
	}
	if seconds > s.cfg.MaxTTL.Seconds() {
		return 0, fmt.Errorf("ttl_seconds %v: at most %g is allowed (--max-ttl)", seconds, s.cfg.MaxTTL.Seconds())
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// inSandbox runs fn with the sandbox a call names (sandbox_id, or the
// session's own), which must exist already.
func (s *Server) inSandbox(ctx context.Context, req *mcp.CallToolRequest, sandboxID string, fn func(goruntime.Sandbox) error) (used, error) {
	u, err := s.call(ctx, req, sandboxID, needExisting, nil, func(sess *goruntime.Session, _ time.Duration) error {
		if sess == nil {
			return errors.New("no sandbox started yet in this session: run run_go_code first, or pass sandbox_id")
		}
		return fn(sess.Sandbox())
	})
	return u, describeSnapshot(sessions.Describe(err))
}

// SnapshotInput is snapshot_sandbox's input.
type SnapshotInput struct {
	SandboxID  string            `json:"sandbox_id,omitempty" jsonschema:"the sandbox to save (from create_sandbox); default: this session's own sandbox"`
	TTLSeconds float64           `json:"ttl_seconds,omitempty" jsonschema:"delete the snapshot this many seconds after it is taken (at least 1); 0 or absent: the default"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"your own key/value labels, listed by list_snapshots (at most 16; keys and values up to 63 of a-z A-Z 0-9 - _ .)"`
}

// SnapshotInfo describes one of the caller's snapshots.
type SnapshotInfo struct {
	SnapshotID string            `json:"snapshot_id" jsonschema:"pass it to fork_sandbox's siblings: create_sandbox's from_snapshot, restore_sandbox, delete_snapshot"`
	Labels     map[string]string `json:"labels"`
	Created    string            `json:"created" jsonschema:"RFC 3339, UTC"`
	ExpiresAt  string            `json:"expires_at" jsonschema:"RFC 3339, UTC: when it is deleted"`
	Bytes      int64             `json:"bytes" jsonschema:"what it holds of the server's snapshot quota"`
	Method     string            `json:"method" jsonschema:"how the backend stored it (copy: the local backend; stream: agent-sandbox)"`
}

func snapshotInfo(sn goruntime.Snapshot) SnapshotInfo {
	labels := maps.Clone(sn.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return SnapshotInfo{SnapshotID: sn.ID, Labels: labels, Created: sn.Created.UTC().Format(time.RFC3339),
		ExpiresAt: sn.Expires.UTC().Format(time.RFC3339), Bytes: sn.Bytes, Method: sn.Method}
}

func (s *Server) snapshotSandbox(ctx context.Context, req *mcp.CallToolRequest, in SnapshotInput) (*mcp.CallToolResult, SnapshotInfo, error) {
	sbk, err := s.snapshots()
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	ttl, err := s.snapshotTTL(in.TTLSeconds)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	if err := goruntime.CheckLabels(in.Labels); err != nil {
		return nil, SnapshotInfo{}, err
	}
	var snap goruntime.Snapshot
	owner := s.principal(req)
	if _, err := s.inSandbox(ctx, req, in.SandboxID, func(sb goruntime.Sandbox) error {
		snap, err = sbk.Snapshot(ctx, owner, sb, goruntime.SnapshotSpec{TTL: ttl, Labels: in.Labels})
		return err
	}); err != nil {
		return nil, SnapshotInfo{}, err
	}
	s.log.Info("snapshot taken", "snapshot_id", snap.ID, "principal", owner, "bytes", snap.Bytes)
	text := fmt.Sprintf("snapshot_id: %s (%d bytes, kept until %s)\nIt holds the sandbox's files: /app and the Go module and build caches (no running process). "+
		"create_sandbox with from_snapshot starts a sandbox from it, restore_sandbox rolls a sandbox back to it, delete_snapshot deletes it.",
		snap.ID, snap.Bytes, snap.Expires.UTC().Format(time.RFC3339))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, snapshotInfo(snap), nil
}

// ForkInput is fork_sandbox's input.
type ForkInput struct {
	SandboxID  string            `json:"sandbox_id,omitempty" jsonschema:"the sandbox to fork (from create_sandbox); default: this session's own sandbox"`
	Count      int               `json:"count" jsonschema:"how many forks to make (1 to 32)"`
	TTLSeconds float64           `json:"ttl_seconds,omitempty" jsonschema:"end each fork after this many seconds without a call using it (at least 1); 0 or absent: the default"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"your own key/value labels for every fork, listed by list_sandboxes"`
}

// ForkInfo is one fork of a fork_sandbox call: its sandbox_id, or why it
// was not made.
type ForkInfo struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the fork's sandbox_id, as create_sandbox returns one"`
	Error     string `json:"error,omitempty" jsonschema:"why this fork was not made (the others are unaffected)"`
}

// ForkOutput is fork_sandbox's result.
type ForkOutput struct {
	Forks []ForkInfo `json:"forks" jsonschema:"one entry per fork asked for, in order"`
}

func (s *Server) forkSandbox(ctx context.Context, req *mcp.CallToolRequest, in ForkInput) (*mcp.CallToolResult, ForkOutput, error) {
	sbk, err := s.snapshots()
	if err != nil {
		return nil, ForkOutput{}, err
	}
	if _, err := s.handles(); err != nil {
		return nil, ForkOutput{}, err
	}
	ttl, err := s.handleTTL(in.TTLSeconds)
	if err != nil {
		return nil, ForkOutput{}, err
	}
	spec := goruntime.ForkSpec{Count: in.Count, Handle: &goruntime.HandleSpec{TTL: ttl, Labels: in.Labels}}
	if err := spec.Validate(); err != nil {
		return nil, ForkOutput{}, err
	}
	owner := s.principal(req)
	out := ForkOutput{Forks: make([]ForkInfo, in.Count)}
	// Room in the sandbox bounds, fork by fork: those past them are
	// refused alone.
	var room int
	for i := range in.Count {
		done, err := s.pool.Reserve(ctx, owner)
		if err != nil {
			out.Forks[i].Error = s.explainLimit(err).Error()
			continue
		}
		defer done()
		room++
	}
	var results []goruntime.ForkResult
	if room > 0 {
		spec.Count = room
		if _, err := s.inSandbox(ctx, req, in.SandboxID, func(sb goruntime.Sandbox) error {
			// Forks open goruntime backends' way, a few at a time.
			octx, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout*time.Duration(1+room/4))
			defer cancel()
			results, err = sbk.Fork(octx, owner, sb, spec)
			return err
		}); err != nil {
			return nil, ForkOutput{}, err
		}
	}
	made := 0
	for i, j := 0, 0; i < in.Count; i++ {
		if out.Forks[i].Error != "" {
			continue
		}
		r := results[j]
		j++
		if r.Err != nil {
			out.Forks[i].Error = describeHandle(r.Err).Error()
			continue
		}
		s.release(ctx, r.Sandbox)
		out.Forks[i].SandboxID = r.Handle.ID
		made++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d forks made; each is a sandbox of its own with the files the sandbox had now (pass its sandbox_id to the other tools):\n", made, in.Count)
	for i, f := range out.Forks {
		if f.Error != "" {
			fmt.Fprintf(&b, "fork %d: error: %s\n", i+1, f.Error)
		} else {
			fmt.Fprintf(&b, "fork %d: sandbox_id %s\n", i+1, f.SandboxID)
		}
	}
	s.log.Info("sandbox forked", "principal", owner, "asked", in.Count, "made", made)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, out, nil
}

// RestoreInput is restore_sandbox's input.
type RestoreInput struct {
	SandboxID  string `json:"sandbox_id,omitempty" jsonschema:"the sandbox to roll back (from create_sandbox); default: this session's own sandbox"`
	SnapshotID string `json:"snapshot_id" jsonschema:"the snapshot of yours to roll it back to"`
}

// RestoreOutput is restore_sandbox's result.
type RestoreOutput struct {
	SandboxID  string `json:"sandbox_id"`
	SnapshotID string `json:"snapshot_id"`
	Restored   bool   `json:"restored"`
}

func (s *Server) restoreSandbox(ctx context.Context, req *mcp.CallToolRequest, in RestoreInput) (*mcp.CallToolResult, RestoreOutput, error) {
	sbk, err := s.snapshots()
	if err != nil {
		return nil, RestoreOutput{}, err
	}
	if in.SnapshotID == "" {
		return nil, RestoreOutput{}, errors.New("snapshot_id is required (list_snapshots lists yours)")
	}
	owner := s.principal(req)
	u, err := s.inSandbox(ctx, req, in.SandboxID, func(sb goruntime.Sandbox) error {
		return sbk.Restore(ctx, owner, sb, in.SnapshotID)
	})
	if err != nil {
		return nil, RestoreOutput{}, err
	}
	text := fmt.Sprintf("sandbox %s rolled back to snapshot %s: /app and HOME are the snapshot's; the build cache kept its entries and gained the snapshot's", u.ID, in.SnapshotID)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}},
		RestoreOutput{SandboxID: u.ID, SnapshotID: in.SnapshotID, Restored: true}, nil
}

// ListSnapshotsOutput is list_snapshots's result.
type ListSnapshotsOutput struct {
	Snapshots []SnapshotInfo `json:"snapshots" jsonschema:"your snapshots, oldest first"`
}

func (s *Server) listSnapshots(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ListSnapshotsOutput, error) {
	sbk, err := s.snapshots()
	if err != nil {
		return nil, ListSnapshotsOutput{}, err
	}
	list, err := sbk.ListSnapshots(ctx, s.principal(req))
	if err != nil {
		return nil, ListSnapshotsOutput{}, err
	}
	out := ListSnapshotsOutput{Snapshots: []SnapshotInfo{}}
	var b strings.Builder
	for _, sn := range list {
		out.Snapshots = append(out.Snapshots, snapshotInfo(sn))
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(sn.Labels)) {
			ls = append(ls, k+"="+sn.Labels[k])
		}
		fmt.Fprintf(&b, "%s  %d bytes  until %s  labels [%s]\n", sn.ID, sn.Bytes, sn.Expires.UTC().Format(time.RFC3339), strings.Join(ls, " "))
	}
	if len(list) == 0 {
		b.WriteString("no snapshots: snapshot_sandbox takes one\n")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, out, nil
}

// DeleteSnapshotInput is delete_snapshot's input.
type DeleteSnapshotInput struct {
	SnapshotID string `json:"snapshot_id" jsonschema:"the snapshot to delete"`
}

// DeleteSnapshotOutput is delete_snapshot's result.
type DeleteSnapshotOutput struct {
	SnapshotID string `json:"snapshot_id"`
	Deleted    bool   `json:"deleted"`
}

func (s *Server) deleteSnapshot(ctx context.Context, req *mcp.CallToolRequest, in DeleteSnapshotInput) (*mcp.CallToolResult, DeleteSnapshotOutput, error) {
	sbk, err := s.snapshots()
	if err != nil {
		return nil, DeleteSnapshotOutput{}, err
	}
	if in.SnapshotID == "" {
		return nil, DeleteSnapshotOutput{}, errors.New("snapshot_id is required (list_snapshots lists yours)")
	}
	if err := sbk.DeleteSnapshot(ctx, s.principal(req), in.SnapshotID); err != nil {
		return nil, DeleteSnapshotOutput{}, describeSnapshot(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted snapshot " + in.SnapshotID}}},
		DeleteSnapshotOutput{SnapshotID: in.SnapshotID, Deleted: true}, nil
}

// addSnapshotTools registers the snapshot tools.
func (s *Server) addSnapshotTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  "snapshot_sandbox",
		Title: "Snapshot a sandbox",
		Description: fmt.Sprintf("Save a sandbox's files (/app, the Go module and build caches; not running processes) as a snapshot of yours and return its snapshot_id. "+
			"Refused while a command runs in it. Start sandboxes from it (create_sandbox from_snapshot) or roll one back to it (restore_sandbox). "+
			"It is deleted after ttl_seconds (default %g, at most %g) or with delete_snapshot.",
			min(defaultSnapshotTTL, s.cfg.MaxTTL).Seconds(), s.cfg.MaxTTL.Seconds()),
		Annotations: &mcp.ToolAnnotations{Title: "Snapshot a sandbox", OpenWorldHint: ptr(false)},
	}, s.snapshotSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  "fork_sandbox",
		Title: "Fork a sandbox",
		Description: "Make count new sandboxes (1 to 32) that each start with the files a sandbox has now, including those just written, and warm Go caches: try several fixes side by side. " +
			"Returns one entry per fork: its sandbox_id, or the error that fork met (the others are made). Each fork is a sandbox of yours like create_sandbox's.",
		Annotations: &mcp.ToolAnnotations{Title: "Fork a sandbox", OpenWorldHint: ptr(false)},
	}, s.forkSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "restore_sandbox",
		Title:       "Roll a sandbox back to a snapshot",
		Description: "Replace a sandbox's /app and HOME with a snapshot's, in place (same sandbox_id). Refused while a command runs in it.",
		Annotations: &mcp.ToolAnnotations{Title: "Roll a sandbox back", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.restoreSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_snapshots",
		Title:       "List your snapshots",
		Description: "List the snapshots you took (snapshot_id, labels, size, when each is deleted).",
		InputSchema: &jsonschema.Schema{Type: "object"},
		Annotations: &mcp.ToolAnnotations{Title: "List your snapshots", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.listSnapshots)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "delete_snapshot",
		Title:       "Delete a snapshot",
		Description: "Delete a snapshot snapshot_sandbox took. Sandboxes started from it keep their files.",
		Annotations: &mcp.ToolAnnotations{Title: "Delete a snapshot", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.deleteSnapshot)
}
