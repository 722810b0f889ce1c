// Package snapshotstore keeps snapshots of sandboxes' files, as tars,
// in a directory of the host's: the local backend's under its state
// directory, the agent-sandbox backend's on a volume every replica of a
// front end mounts (docs/kubernetes.md, "Snapshots"):
//
//	<root>/<owner key>/<id>/meta.json   the record (Meta)
//	<root>/<owner key>/<id>/files.tar   the files, as one tar (method copy), or
//	<root>/<owner key>/<id>/tree/       the files, as a sealed directory tree (method overlay: tree.go)
//	<root>/<owner key>/<id>/users/      the sandboxes layered on the tree, one empty file each
//	<root>/tmp/                         snapshots being written, and forks' transient ones
//	<root>/lock                         flock: held exclusively while the quota is counted
//
// The owner key is the first 128 bits of the owner's SHA-256 in hex, as
// for handles: an ID is looked up only among its owner's own, so a
// foreign ID is missing by construction. The store moves bytes and keeps
// the rules (ownership, TTL, the total quota); what goes into the tar and
// how it gets in and out of a sandbox is the backend's (local's
// snapcopy.go, agentsandbox's snapshot.go).
//
// Processes on several machines may share a root: a commit is a rename
// within it, and the quota is counted under flock(2) on <root>/lock,
// which a shared file system must honour across its clients (NFSv4 and
// CephFS do; docs/kubernetes.md says which volumes were tried).
package snapshotstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrNotFound: the owner has no live snapshot of that ID.
var ErrNotFound = errors.New("no such snapshot")

// ErrQuota: the snapshots would hold more than the store's quota.
var ErrQuota = errors.New("snapshot quota exceeded")

// IDLen is the length of an ID: 32 hex digits, 128 random bits.
const IDLen = 32

// Meta is a snapshot's record.
type Meta struct {
	ID      string            `json:"id"`
	Owner   string            `json:"owner"`
	Labels  map[string]string `json:"labels,omitempty"`
	Created time.Time         `json:"created"`
	Expires time.Time         `json:"expires"`
	Bytes   int64             `json:"bytes"`
	Method  string            `json:"method"` // how the files are kept: MethodCopy, MethodOverlay (local) or "stream" (agent-sandbox)
	Source  string            `json:"source"` // the sandbox it was taken from
	// Hidden: a fork's snapshot, never listed nor opened by ID, which
	// lives as long as the forks layered on it (tree.go).
	Hidden bool `json:"hidden,omitempty"`
	// Retired: deleted or expired while sandboxes were layered on it;
	// kept, and counted, until they are gone (tree.go).
	Retired bool `json:"retired,omitempty"`
}

// How a snapshot's files are kept.
const (
	// MethodCopy: one tar, copied into each sandbox made from it.
	MethodCopy = "copy"
	// MethodOverlay: a sealed directory tree, the read-only lower layer
	// of each sandbox made from it (tree.go).
	MethodOverlay = "overlay"
)

// Store is the snapshots under Root, holding at most Quota bytes
// together (0: no snapshot fits), and at most OwnerQuota of them one
// owner's (0: no share but Quota), so that one owner cannot fill the
// store for all. Live reports whether the sandbox of an ID still exists
// (nil: none does): a tree stays while a sandbox that is layered on it
// lives.
type Store struct {
	Root       string
	Quota      int64
	OwnerQuota int64
	Live       func(sandboxID string) bool
}

// NewID returns a new snapshot ID.
func NewID() string {
	var b [IDLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id has NewID's shape.
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (s Store) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(s.Root, hex.EncodeToString(sum[:16]))
}

func (s Store) dir(owner, id string) string { return filepath.Join(s.ownerDir(owner), id) }

// Files is the path of the tar of a snapshot Open returned.
func (s Store) Files(m Meta) string { return filepath.Join(s.dir(m.Owner, m.ID), "files.tar") }

func (s Store) tmp() string { return filepath.Join(s.Root, "tmp") }

// Temp is a tar being written: Create's before it is committed, or a
// fork's that is never committed. Remove it when done with it.
type Temp struct {
	Dir  string
	File *os.File // the tar; nil for a tree (NewTreeTemp)
	// Sink, for a tree, is where Write sends the tar's bytes (what
	// extracts them into Tree).
	Sink io.Writer
	n    int64
	max  int64
	// store and held (what its live snapshots held when t was started)
	// bound the tars written at once: see Write.
	store   Store
	held    int64
	checked int64 // n at the last look at the other tars
}

// Path is the tar's path.
func (t *Temp) Path() string { return t.File.Name() }

// Write writes p to the tar, failing with ErrQuota once it would pass
// the quota on its own, or once the live snapshots and every tar being
// written (other sandboxes' snapshots and forks taken at once, by any
// process on this state directory) would hold more than the quota
// together: so concurrent snapshots cannot fill the host's disk with
// quota-sized tars that commit then refuses.
func (t *Temp) Write(p []byte) (int, error) {
	if t.n+int64(len(p)) > t.max {
		return 0, fmt.Errorf("%w: the snapshot alone is over the quota of %d bytes", ErrQuota, t.max)
	}
	if t.n+int64(len(p))-t.checked >= inFlightEvery {
		t.checked = t.n
		if writing := t.store.writing(); t.held+writing > t.max {
			return 0, fmt.Errorf("%w: the snapshots of this state directory hold %d bytes and those being taken now %d more, past the quota of %d bytes: try again when they are done, or delete snapshots",
				ErrQuota, t.held, writing, t.max)
		}
	}
	var w io.Writer = t.File
	if t.Sink != nil {
		w = t.Sink
	}
	n, err := w.Write(p)
	if t.File == nil && (t.n+int64(n))>>20 != t.n>>20 {
		// A tree: what it holds so far, to the MiB, for the others'
		// look (writing).
		_ = os.WriteFile(filepath.Join(t.Dir, "streamed"), []byte(strconv.FormatInt(t.n+int64(n), 10)), 0o600)
	}
	t.n += int64(n)
	return n, err
}

// Size is how many bytes were written.
func (t *Temp) Size() int64 { return t.n }

// Remove deletes the tar (or tree).
func (t *Temp) Remove() error {
	if t.File != nil {
		t.File.Close()
	}
	return os.RemoveAll(t.Dir)
}

// NewTemp starts a tar, capped at the quota (see Temp.Write).
func (s Store) NewTemp() (*Temp, error) {
	held, err := s.Prune()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.tmp(), 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	dir, err := os.MkdirTemp(s.tmp(), "snap-")
	if err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "files.tar"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create snapshot file: %w", err)
	}
	return &Temp{Dir: dir, File: f, max: s.Quota, store: s, held: held}, nil
}

// Commit makes t owner's snapshot m (ID, Bytes and Owner are set here):
// under the store's lock it removes expired snapshots and refuses with
// ErrQuota when the live ones and t would hold more than the quota. t is
// gone either way.
func (s Store) Commit(t *Temp, m Meta) (Meta, error) {
	defer t.Remove()
	size := t.n
	if t.File != nil {
		if err := t.File.Sync(); err != nil {
			return Meta{}, fmt.Errorf("write snapshot: %w", err)
		}
	} else {
		var err error
		if size, err = seal(t.Tree()); err != nil {
			return Meta{}, err
		}
	}
	unlock, err := s.lock()
	if err != nil {
		return Meta{}, err
	}
	defer unlock()
	now := time.Now()
	used, err := s.prune(now)
	if err != nil {
		return Meta{}, err
	}
	m.ID, m.Bytes = NewID(), size
	if used+m.Bytes > s.Quota {
		return Meta{}, fmt.Errorf("%w: the snapshots of this state directory hold %d bytes, this one needs %d more, and the quota is %d bytes: delete snapshots or wait for them to expire",
			ErrQuota, used, m.Bytes, s.Quota)
	}
	if s.OwnerQuota > 0 {
		mine := s.ownerUsed(m.Owner)
		if mine+m.Bytes > s.OwnerQuota {
			return Meta{}, fmt.Errorf("%w: this owner's snapshots (and forks' snapshots) hold %d bytes, this one needs %d more, and an owner's share of the quota is %d bytes: delete snapshots, close forks or wait for them to expire",
				ErrQuota, mine, m.Bytes, s.OwnerQuota)
		}
	}
	if err := writeJSON(filepath.Join(t.Dir, "meta.json"), m); err != nil {
		return Meta{}, fmt.Errorf("write snapshot record: %w", err)
	}
	if err := os.MkdirAll(s.ownerDir(m.Owner), 0o700); err != nil {
		return Meta{}, fmt.Errorf("create snapshot directory: %w", err)
	}
	if err := os.Rename(t.Dir, s.dir(m.Owner, m.ID)); err != nil {
		return Meta{}, fmt.Errorf("commit snapshot: %w", err)
	}
	return m, nil
}

// Open returns owner's live snapshot id. Any failure (malformed ID, no
// such snapshot, another owner's, expired) is ErrNotFound.
func (s Store) Open(owner, id string) (Meta, error) {
	if !ValidID(id) {
		return Meta{}, ErrNotFound
	}
	m, err := readMeta(filepath.Join(s.dir(owner, id), "meta.json"))
	if err != nil || m.Owner != owner || m.ID != id || !time.Now().Before(m.Expires) || m.Hidden || m.Retired {
		return Meta{}, ErrNotFound
	}
	return m, nil
}

// List returns owner's live snapshots, in no order.
func (s Store) List(owner string) ([]Meta, error) {
	entries, err := os.ReadDir(s.ownerDir(owner))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Meta
	for _, e := range entries {
		if m, err := s.Open(owner, e.Name()); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Delete deletes owner's snapshot id (ErrNotFound if it has none): at
// once, or, while sandboxes are layered on its tree, as far as its owner
// can tell (it is retired: kept and counted until they are gone).
func (s Store) Delete(owner, id string) error {
	m, err := s.Open(owner, id)
	if err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return s.end(s.dir(owner, id), m, time.Now())
}

// remove deletes a snapshot's directory: its record first, so a half
// removed one is never read as a snapshot.
func (s Store) remove(dir string) error {
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	return nil
}

// Prune removes expired snapshots, and the temporary tars of writers that
// died (older than tmpAge), and returns the bytes the live ones hold.
func (s Store) Prune() (int64, error) {
	unlock, err := s.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	return s.prune(time.Now())
}

// tmpAge is how old a temporary tar must be to be taken for a dead
// writer's: far longer than any copy takes.
const tmpAge = time.Hour

func (s Store) prune(now time.Time) (int64, error) {
	owners, err := os.ReadDir(s.Root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read snapshots: %w", err)
	}
	var used int64
	for _, o := range owners {
		if !o.IsDir() {
			continue
		}
		odir := filepath.Join(s.Root, o.Name())
		entries, _ := os.ReadDir(odir)
		for _, e := range entries {
			dir := filepath.Join(odir, e.Name())
			if o.Name() == "tmp" {
				if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > tmpAge {
					_ = os.RemoveAll(dir)
				}
				continue
			}
			m, err := readMeta(filepath.Join(dir, "meta.json"))
			if err != nil {
				_ = s.remove(dir)
				continue
			}
			if !now.Before(m.Expires) || m.Hidden || m.Retired {
				if s.end(dir, m, now) == nil && !s.inUse(dir, m, now) {
					continue
				}
			}
			used += m.Bytes
		}
	}
	return used, nil
}

func (s Store) lock() (func(), error) {
	if err := os.MkdirAll(s.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.Root, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock snapshots: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock snapshots: %w", err)
	}
	return func() { f.Close() }, nil
}

func readMeta(path string) (Meta, error) {
	var m Meta
	data, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, err
	}
	if !ValidID(m.ID) {
		return m, errors.New("not a snapshot record")
	}
	return m, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Copy copies the tar of m into w.
func (s Store) Copy(m Meta, w io.Writer) error {
	f, err := os.Open(s.Files(m))
	if err != nil {
		return fmt.Errorf("read snapshot %s: %w", m.ID, err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("read snapshot %s: %w", m.ID, err)
	}
	return nil
}
