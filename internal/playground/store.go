package playground

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// store keeps shared texts on disk, content-addressed: a text's ID is
// its SHA-256's first 16 bytes (base64url), so the same text always
// gets the same link and a link cannot be guessed from another. The
// texts together hold at most quota bytes.
type store struct {
	dir   string
	max   int64 // one text
	quota int64 // all texts

	mu    sync.Mutex
	total int64 // bytes of the texts in dir
}

// errTooLarge is wrapped by put's error for a text past the cap.
var errTooLarge = errors.New("too large")

// errStoreFull is wrapped by put's error for a new text past the quota.
var errStoreFull = errors.New("the share store is full")

// newStore returns the store of dir, counting the texts already there.
func newStore(dir string, max, quota int64) (*store, error) {
	s := &store{dir: dir, max: max, quota: quota}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("share directory: %w", err)
	}
	for _, e := range ents {
		if !idRE.MatchString(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("share directory: %w", err)
		}
		s.total += info.Size()
	}
	return s, nil
}

// errNoShare is wrapped by get's error for an ID with no text.
var errNoShare = errors.New("no such shared text")

// idRE is the shape of a share ID.
var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// shareID returns the ID of text.
func shareID(text []byte) string {
	sum := sha256.Sum256(text)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// put stores text (once: the same text is already there) and returns
// its ID.
func (s *store) put(text []byte) (string, error) {
	if int64(len(text)) > s.max {
		return "", fmt.Errorf("share: %d bytes, at most %d may be shared: %w", len(text), s.max, errTooLarge)
	}
	id := shareID(text)
	path := filepath.Join(s.dir, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return id, nil
	}
	if s.total+int64(len(text)) > s.quota {
		return "", fmt.Errorf("%w: it holds %d of its %d bytes (--max-share-store-mb); a text shared before still opens", errStoreFull, s.total, s.quota)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", fmt.Errorf("share: make the share directory: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, ".put-*")
	if err != nil {
		return "", fmt.Errorf("share: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(text); err != nil {
		tmp.Close()
		return "", fmt.Errorf("share: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("share: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("share: %w", err)
	}
	s.total += int64(len(text))
	return id, nil
}

// get returns the text of id.
func (s *store) get(id string) ([]byte, error) {
	if !idRE.MatchString(id) {
		return nil, fmt.Errorf("share %q: %w", id, errNoShare)
	}
	data, err := os.ReadFile(filepath.Join(s.dir, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("share %s: %w", id, errNoShare)
	}
	if err != nil {
		return nil, fmt.Errorf("share %s: %w", id, err)
	}
	return data, nil
}
