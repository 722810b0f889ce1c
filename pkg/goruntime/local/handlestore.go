package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// handleStore is the handle records of a state directory (handles/, see
// handles.go): where an owner's live, how one is read and locked, and
// the reaper that ends those idle past their TTL.
type handleStore struct {
	root    string                    // StateDir/handles
	alive   func(sandbox string) bool // the sandbox's processes run
	destroy func(ctx context.Context, sandbox string) error
	logger  *slog.Logger
}

// handleRecord is a handle's file.
type handleRecord struct {
	ID      string            `json:"id"`
	Owner   string            `json:"owner"`
	Labels  map[string]string `json:"labels,omitempty"`
	TTL     time.Duration     `json:"ttl_ns"`
	Created time.Time         `json:"created"`
	Sandbox string            `json:"sandbox"` // the sandbox's ID (sandboxes/<id>)
}

// ownerDir is the directory of owner's handle files.
func (h handleStore) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(h.root, hex.EncodeToString(sum[:16]))
}

// lockHandle opens a handle's file and takes a shared lock on it: the
// handle is in use until the file is closed.
func lockHandle(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func (r handleRecord) handle(lastUsed time.Time) goruntime.Handle {
	lastUsed = lastUsed.UTC()
	return goruntime.Handle{ID: r.ID, Owner: r.Owner, Labels: maps.Clone(r.Labels), TTL: r.TTL,
		Created: r.Created, LastUsed: lastUsed, Expires: lastUsed.Add(r.TTL)}
}

// read reads owner's handle id. Any failure (no such file, another
// owner's record, a file that is not one) is goruntime.HandleNotFound.
func (h handleStore) read(owner, id string) (string, handleRecord, os.FileInfo, error) {
	if !goruntime.ValidHandleID(id) {
		return "", handleRecord{}, nil, goruntime.HandleNotFound(id)
	}
	path := filepath.Join(h.ownerDir(owner), id+".json")
	rec, fi, err := readHandleFile(path)
	if err != nil || rec.Owner != owner || rec.ID != id {
		return "", handleRecord{}, nil, goruntime.HandleNotFound(id)
	}
	return path, rec, fi, nil
}

func readHandleFile(path string) (handleRecord, os.FileInfo, error) {
	var rec handleRecord
	fi, err := os.Stat(path)
	if err != nil {
		return rec, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return rec, nil, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, nil, err
	}
	if !goruntime.ValidHandleID(rec.ID) || !sandboxid.Valid(rec.Sandbox) || rec.TTL <= 0 {
		return rec, nil, errors.New("not a handle record")
	}
	return rec, fi, nil
}

// of reports whether sandbox id is a handle's (a record names it,
// live or not yet reaped).
func (h handleStore) of(id string) bool {
	found := false
	_ = h.each(func(rec handleRecord, _ os.FileInfo) bool {
		found = rec.Sandbox == id
		return !found
	})
	return found
}

// each calls fn with every handle record in the state directory,
// of every owner, until fn returns false.
func (h handleStore) each(fn func(handleRecord, os.FileInfo) bool) error {
	root := h.root
	owners, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, o := range owners {
		entries, _ := os.ReadDir(filepath.Join(root, o.Name()))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			rec, fi, err := readHandleFile(filepath.Join(root, o.Name(), e.Name()))
			if err == nil && !fn(rec, fi) {
				return nil
			}
		}
	}
	return nil
}
