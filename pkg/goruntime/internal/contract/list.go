package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Limits on a /list answer, checked while it is decoded, entry by entry,
// so a server that lies (its socket replaced from inside the sandbox)
// makes the host hold no more than about maxListEntries small entries:
// decoded whole, 63 MiB of "[{},{},...]" took the host from 40 MB to 4 GB.
const (
	// maxListEntries is the most entries a listing may have: more than
	// the inodes of the local backend's default disk
	// (local.DefaultDiskInodes), so any directory a default sandbox can
	// make lists whole; a larger one is refused with an error naming
	// this cap (list it with a command, e.g. ls | head).
	maxListEntries = 1 << 18
	// maxListAnswer bounds the bytes of a /list answer.
	maxListAnswer = 64 << 20
	// maxEntryBytes bounds the JSON of one entry: a 255-byte name
	// (NAME_MAX) written as \u escapes is 1530 bytes, the rest ~100.
	maxEntryBytes = 4 << 10
	// maxNameBytes is NAME_MAX, the longest name a Linux file system
	// gives an entry.
	maxNameBytes = 255
)

// errListTooLong is wrapped when a listing is over maxListEntries.
var errListTooLong = fmt.Errorf("the listing has more than %d entries (the client's cap on one listing)", maxListEntries)

// decodeList decodes a /list answer from r, one entry at a time, and
// fails (before holding more) on an answer over maxListAnswer bytes, an
// entry over maxEntryBytes, a name over maxNameBytes or more than
// maxListEntries entries.
func decodeList(r io.Reader) ([]goruntime.FileInfo, error) {
	budget := &entryBudget{r: r}
	dec := json.NewDecoder(budget)
	budget.left = maxEntryBytes
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("want a JSON array of entries, got %v", tok)
	}
	var out []goruntime.FileInfo
	for dec.More() {
		if len(out) == maxListEntries {
			return nil, fmt.Errorf("%w: %w", errListTooLong, ErrAnswerTooLarge)
		}
		budget.left = maxEntryBytes
		var e wire.FileEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("entry %d: %w", len(out), err)
		}
		if len(e.Name) > maxNameBytes {
			return nil, fmt.Errorf("entry %d: a name of %d bytes (a file system allows %d): %w", len(out), len(e.Name), maxNameBytes, ErrAnswerTooLarge)
		}
		sec, frac := math.Modf(e.ModTime)
		out = append(out, goruntime.FileInfo{
			Name:    e.Name,
			Size:    e.Size,
			IsDir:   e.Type == "directory",
			ModTime: time.Unix(int64(sec), int64(frac*1e9)),
		})
	}
	budget.left = maxEntryBytes
	if _, err := dec.Token(); err != nil { // the closing ]
		return nil, err
	}
	if out == nil {
		out = []goruntime.FileInfo{}
	}
	return out, nil
}

// entryBudget lets a json.Decoder read at most left bytes before the
// next reset: one entry's worth (the decoder reads ahead by at most what
// it is let read, so its buffer stays within a few entries' size).
type entryBudget struct {
	r    io.Reader
	left int64
}

var errEntryTooLarge = errors.New("an entry of the listing is larger than any the runtime server sends")

func (b *entryBudget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("over %d bytes: %w: %w", maxEntryBytes, errEntryTooLarge, ErrAnswerTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
