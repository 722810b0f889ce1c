package server

import (
	"log/slog"
	"os"
	"sync"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/pathsafe"
)

// baseRoot is the base directory (/app) the server serves files in,
// opened at start and opened again when its path names another directory
// than the one opened: the local backend layers a pooled sandbox's /app
// over a snapshot after its server started (an overlay mounted over
// /app: pkg/goruntime/local's snapcow.go), and the server must then serve
// the files the sandbox's commands see. One stat of the path per file
// request tells. Nothing in a sandbox can make its path name another
// directory: it is a mount point, which no sandbox process can unmount,
// move or mount over.
type baseRoot struct {
	dir string
	log *slog.Logger

	mu  sync.Mutex
	cur *pathsafe.Root
	id  fileID
	old []*pathsafe.Root // replaced; a request may still use one, so close closes them
}

// fileID is what tells two directories apart.
type fileID struct{ dev, ino uint64 }

// idOf is fi's fileID (zero when the platform has none).
func idOf(fi os.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}
}

// openBaseRoot opens dir as the base directory.
func openBaseRoot(dir string, log *slog.Logger) (*baseRoot, error) {
	r, err := pathsafe.Open(dir)
	if err != nil {
		return nil, err
	}
	b := &baseRoot{dir: r.Dir(), log: log, cur: r}
	if fi, err := r.OS().Stat("."); err == nil {
		b.id = idOf(fi)
	}
	return b, nil
}

// get returns the base directory the path names now. Should it name
// another directory than the one opened, that one is opened instead;
// should the path not be readable or the new directory not open, the
// one opened last stays (whose operations then fail as they would).
func (b *baseRoot) get() *pathsafe.Root {
	fi, err := os.Stat(b.dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil || idOf(fi) == b.id {
		return b.cur
	}
	r, err := pathsafe.Open(b.dir)
	if err != nil {
		b.log.Warn("open the base directory again after it changed", "dir", b.dir, "err", err)
		return b.cur
	}
	id := idOf(fi)
	if fi, err := r.OS().Stat("."); err == nil { // what was opened, should it have changed again meanwhile
		id = idOf(fi)
	}
	b.log.Info("base directory changed (layered over a snapshot): opened again", "dir", b.dir)
	b.old = append(b.old, b.cur)
	b.cur, b.id = r, id
	return r
}

// close closes every base directory opened.
func (b *baseRoot) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.cur.Close()
	for _, r := range b.old {
		r.Close()
	}
	b.old = nil
	return err
}
