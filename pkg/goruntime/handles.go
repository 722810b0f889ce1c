package goruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// HandleBackend is implemented by backends whose sandboxes can outlive the
// process and connection that made them: a handle is a durable, owned
// name for a sandbox, kept where the backend keeps its sandboxes (the
// local backend's state directory, the agent-sandbox claim) and never
// only in one process's memory, so any process using the same backend
// (a restarted front end, another replica) can attach to it. A handle's
// sandbox ends when it is deleted or when it has been idle (no call
// using it) past its TTL, even with no process of the front end left.
//
// Find it with a type assertion on a Backend. Every implementation runs
// goruntimetest.CheckHandles in its tests.
//
// Ownership is the caller's to establish: owner is an identity the front
// end authenticated (a principal's name). A handle ID of another owner
// and an ID that does not exist get the same error, wrapping
// ErrSandboxNotFound and naming only the ID given, so no caller learns
// whether another owner's handle exists.
type HandleBackend interface {
	Backend
	// CreateHandle opens a sandbox held by a new handle of owner and
	// returns the handle and the sandbox, attached: release it with
	// Sandbox.Disconnect (the sandbox keeps running; that use renews the
	// handle) or end it with Sandbox.Close (which deletes the handle too).
	// Errors: spec is invalid (HandleSpec.Validate), or what Open returns.
	CreateHandle(ctx context.Context, owner string, spec HandleSpec) (Handle, Sandbox, error)
	// AttachHandle attaches to the sandbox of owner's handle id and
	// renews the handle (its idle TTL counts again from now, and from the
	// attached sandbox's Disconnect). Errors wrap ErrSandboxNotFound when
	// owner has no live handle id (missing, another owner's, expired,
	// deleted, its sandbox gone).
	AttachHandle(ctx context.Context, owner, id string) (Handle, Sandbox, error)
	// ListHandles returns owner's live handles, oldest first.
	ListHandles(ctx context.Context, owner string) ([]Handle, error)
	// CountHandles returns how many live handles the backend keeps, of
	// every owner: what a front end bounds and reports (a gauge with no
	// owner in it). Like ListHandles it reads the backend's state, so
	// every process using the same backend sees the same count.
	CountHandles(ctx context.Context) (int, error)
	// DeleteHandle ends the sandbox of owner's handle id and forgets the
	// handle. Errors wrap ErrSandboxNotFound as AttachHandle's do.
	DeleteHandle(ctx context.Context, owner, id string) error
}

// HandleSpec says how CreateHandle makes a handle.
type HandleSpec struct {
	// FromSnapshot, when set, names a snapshot of the same owner the
	// handle's sandbox starts from (SnapshotBackend); empty: an empty
	// sandbox. A backend without snapshots refuses it.
	FromSnapshot string
	// Labels are the caller's own key/value pairs, kept with the handle
	// and listed with it (CheckLabels says which are allowed).
	Labels map[string]string
	// TTL is the idle time after which the handle's sandbox ends: it
	// counts from the handle's last use (an attach, a call's end).
	// Required, at least MinHandleTTL; a front end caps it.
	TTL time.Duration
}

// Handle describes one handle.
type Handle struct {
	// ID names the handle: HandleIDLen lower-case hex digits, 128 random
	// bits (NewHandleID).
	ID string
	// Owner is the identity that made it.
	Owner  string
	Labels map[string]string
	// TTL is the idle time after which the sandbox ends.
	TTL time.Duration
	// Created is when it was made; LastUsed its latest use (attach,
	// release). Both UTC.
	Created, LastUsed time.Time
	// Expires is LastUsed + TTL: when the sandbox ends if unused. A
	// sandbox attached at that moment ends once its runtime server has
	// been idle for TTL.
	Expires time.Time
}

// Limits of handles, the same for every backend.
const (
	// HandleIDLen is the length of a handle ID: 32 hex digits, 128 bits.
	HandleIDLen = 32
	// MinHandleTTL is the shortest idle TTL a handle may have.
	MinHandleTTL = time.Second
	// MaxHandleLabels is the most labels a handle may carry.
	MaxHandleLabels = 16
	// maxLabelKey and maxLabelValue bound a label's key and value, in
	// bytes: a Kubernetes label value's length, so a backend can store
	// them as labels or annotations.
	maxLabelKey   = 63
	maxLabelValue = 63
	// MaxOwnerLen bounds an owner's name, in bytes.
	MaxOwnerLen = 253
)

// NewHandleID returns a new handle ID: 128 bits from crypto/rand in hex.
func NewHandleID() string {
	var b [HandleIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

// ValidHandleID reports whether id has the shape NewHandleID makes, so it
// can name a file or a Kubernetes object safely.
func ValidHandleID(id string) bool {
	if len(id) != HandleIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckOwner checks an owner's name: 1 to MaxOwnerLen bytes of printable
// UTF-8 without spaces.
func CheckOwner(owner string) error {
	if owner == "" || len(owner) > MaxOwnerLen || !utf8.ValidString(owner) {
		return fmt.Errorf("handle owner %q: want 1 to %d bytes of UTF-8", owner, MaxOwnerLen)
	}
	for _, r := range owner {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("handle owner %q: no spaces or control characters", owner)
		}
	}
	return nil
}

// CheckLabels checks a handle's labels: at most MaxHandleLabels, each key
// 1 to 63 bytes and each value 0 to 63 bytes of letters, digits, '-',
// '_' and '.', starting and ending with a letter or digit (a Kubernetes
// label value's syntax).
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxHandleLabels {
		return fmt.Errorf("labels: %d given, at most %d allowed", len(labels), MaxHandleLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKey || !labelSyntax(k) {
			return fmt.Errorf("label key %q: want 1 to %d of a-z A-Z 0-9 - _ . starting and ending with a letter or digit", k, maxLabelKey)
		}
		if len(v) > maxLabelValue || (v != "" && !labelSyntax(v)) {
			return fmt.Errorf("label %s value %q: want 0 to %d of a-z A-Z 0-9 - _ . starting and ending with a letter or digit", k, v, maxLabelValue)
		}
	}
	return nil
}

func labelSyntax(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return r > 0x7f || !alnum(byte(r)) && r != '-' && r != '_' && r != '.'
	}) < 0
}

// Validate checks spec (labels, TTL). Backends call it in CreateHandle
// before anything is made.
func (spec HandleSpec) Validate() error {
	if spec.TTL < MinHandleTTL {
		return fmt.Errorf("handle TTL %s: at least %s", spec.TTL, MinHandleTTL)
	}
	if spec.FromSnapshot != "" && !ValidHandleID(spec.FromSnapshot) {
		return SnapshotNotFound(spec.FromSnapshot)
	}
	return CheckLabels(spec.Labels)
}

// SortHandles sorts hs as ListHandles returns them: oldest first, then
// by ID.
func SortHandles(hs []Handle) {
	slices.SortFunc(hs, func(x, y Handle) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// HandleNotFound is the one error for an owner's handle that is missing,
// another owner's, expired or deleted: it names only the ID given (quoted
// and cut, as the caller wrote it) and wraps ErrSandboxNotFound. Every
// HandleBackend returns it in all those cases, so the answers are the
// same byte for byte.
func HandleNotFound(id string) error {
	if len(id) > HandleIDLen+8 {
		id = id[:HandleIDLen+8] + "…"
	}
	return fmt.Errorf("sandbox handle %q: %w", id, ErrSandboxNotFound)
}
