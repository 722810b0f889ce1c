package goruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SnapshotBackend is implemented by backends that can save a sandbox's
// files and start sandboxes from them: snapshots, forks and rollback of a
// warm Go workspace. Find it with a type assertion on a Backend, as
// HandleBackend.
//
// A snapshot holds the sandbox's files and nothing else: /app, and HOME
// with the Go module cache and the build cache the sandbox added to the
// seed. Running processes, /tmp and the sandbox's identity (ID, host
// name, ids) are not kept: a sandbox opened from a snapshot is a fresh
// sandbox with those files. A snapshot is refused, with an error wrapping
// ErrSandboxBusy, while anything but the sandbox's runtime server runs in
// it (a command, or a process a command left behind), so what it holds is
// never a half-written state.
//
// Snapshots outlive the process that took them (they are kept where the
// backend keeps its sandboxes), end at their TTL, and together hold at
// most the backend's snapshot quota: past it a snapshot fails with an
// error wrapping ErrSnapshotQuota. They are owned like handles: owner is
// an identity the front end authenticated, and another owner's snapshot
// ID gets the same error as one that does not exist (wrapping
// ErrSnapshotNotFound, naming only the ID given). IDs are 128 random bits
// (NewHandleID's shape).
//
// The operations name sandboxes by value, so a backend can move the files
// any way its sandboxes allow: the local backend takes them with tar run
// as the sandboxes' own processes run and, as root, layers the sandboxes
// made from a snapshot on it copy-on-write (elsewhere it copies them
// in); the agent-sandbox backend, whose sandboxes are pods, streams them
// out of the pod and back in as one tar through the runtime server (GET
// and POST /snapshot), into a store its front end's replicas share,
// keeping the same contract.
type SnapshotBackend interface {
	Backend
	// Snapshot saves sb's files as a new snapshot of owner. sb stays as it
	// was. Errors wrap ErrSandboxBusy (something runs in sb),
	// ErrSnapshotQuota (the snapshots would hold more than the quota),
	// or name what failed.
	Snapshot(ctx context.Context, owner string, sb Sandbox, spec SnapshotSpec) (Snapshot, error)
	// OpenSnapshot opens a new sandbox holding the files of owner's
	// snapshot id. Errors wrap ErrSnapshotNotFound, or are Open's.
	OpenSnapshot(ctx context.Context, owner, id string) (Sandbox, error)
	// Fork opens spec.Count new sandboxes holding sb's files as they are
	// now (a file written just before the call is in every fork). Each
	// fork is a sandbox of its own: what one does is invisible to the
	// others and to sb. The error is for the call as a whole (sb busy,
	// its files not readable, spec invalid): then no fork was made.
	// Otherwise there is one result per fork, each with its sandbox or
	// its own error, so a partial failure names the forks it hit.
	Fork(ctx context.Context, owner string, sb Sandbox, spec ForkSpec) ([]ForkResult, error)
	// Restore rolls sb back to owner's snapshot id in place: /app and
	// HOME (a pod's GOPATH) become the snapshot's; the build cache (and
	// a pod's module cache, which lives outside its HOME) keeps what it
	// has and gains the snapshot's entries (entries are content-addressed,
	// so an extra one changes no result). sb keeps its identity and /tmp.
	// Errors wrap ErrSnapshotNotFound or ErrSandboxBusy, or name what
	// failed (sb then holds part of the snapshot: restore again).
	Restore(ctx context.Context, owner string, sb Sandbox, id string) error
	// ListSnapshots returns owner's live snapshots, oldest first.
	ListSnapshots(ctx context.Context, owner string) ([]Snapshot, error)
	// DeleteSnapshot deletes owner's snapshot id. Errors wrap
	// ErrSnapshotNotFound.
	DeleteSnapshot(ctx context.Context, owner, id string) error
}

// Errors of snapshots.
var (
	// ErrSnapshotNotFound: the owner has no live snapshot of that ID
	// (missing, another owner's, expired, deleted).
	ErrSnapshotNotFound = errors.New("snapshot not found")
	// ErrSandboxBusy: the sandbox runs a command (or a process a command
	// left behind), and the operation needs it still.
	ErrSandboxBusy = errors.New("sandbox is busy")
	// ErrSnapshotQuota: the snapshots would hold more than the backend's
	// total snapshot quota. Delete snapshots, or raise the quota.
	ErrSnapshotQuota = errors.New("snapshot quota exceeded")
)

// SnapshotNotFound is the error for an ID the owner has no snapshot of.
func SnapshotNotFound(id string) error {
	if len(id) > HandleIDLen+8 {
		id = id[:HandleIDLen+8] + "…"
	}
	return fmt.Errorf("snapshot %q: %w", id, ErrSnapshotNotFound)
}

// SnapshotSpec says how Snapshot makes a snapshot.
type SnapshotSpec struct {
	// Labels are the caller's own key/value pairs (CheckLabels).
	Labels map[string]string
	// TTL is how long the snapshot lives from its creation. Required,
	// at least MinHandleTTL; a front end caps it.
	TTL time.Duration
}

// Validate checks spec.
func (spec SnapshotSpec) Validate() error {
	if spec.TTL < MinHandleTTL {
		return fmt.Errorf("snapshot TTL %s: at least %s", spec.TTL, MinHandleTTL)
	}
	return CheckLabels(spec.Labels)
}

// Snapshot describes one snapshot.
type Snapshot struct {
	// ID names it: HandleIDLen lower-case hex digits, 128 random bits.
	ID     string
	Owner  string
	Labels map[string]string
	// Created is when it was taken, Expires when it ends (Created+TTL).
	// Both UTC.
	Created, Expires time.Time
	// Bytes is what it takes of the snapshot quota.
	Bytes int64
	// Method says how the backend stored it (the local backend:
	// "overlay", a tree sandboxes are layered on, or "copy", a tar;
	// agent-sandbox: "stream").
	Method string
}

// SortSnapshots sorts ss as ListSnapshots returns them: oldest first,
// then by ID.
func SortSnapshots(ss []Snapshot) {
	slices.SortFunc(ss, func(x, y Snapshot) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		if x.ID < y.ID {
			return -1
		}
		if x.ID > y.ID {
			return 1
		}
		return 0
	})
}

// MaxForks is the most forks one Fork call makes.
const MaxForks = 32

// ForkSpec says how Fork makes its forks.
type ForkSpec struct {
	// Count is how many forks to make: 1 to MaxForks.
	Count int
	// Handle, when set, makes each fork a sandbox held by a new handle of
	// the owner with this spec (the backend must be a HandleBackend);
	// otherwise forks are plain sandboxes, as Open returns.
	Handle *HandleSpec
}

// Validate checks spec.
func (spec ForkSpec) Validate() error {
	if spec.Count < 1 || spec.Count > MaxForks {
		return fmt.Errorf("fork count %d: want 1 to %d", spec.Count, MaxForks)
	}
	if spec.Handle != nil {
		if spec.Handle.FromSnapshot != "" {
			return errors.New("fork: the forks' handle spec names a snapshot; a fork starts from its sandbox")
		}
		return spec.Handle.Validate()
	}
	return nil
}

// ForkResult is one fork of a Fork call: its sandbox (attached, as Open
// returns it) and, with ForkSpec.Handle, its handle; or its error.
type ForkResult struct {
	Handle  Handle
	Sandbox Sandbox
	Err     error
}
