package server

// Restoring a snapshot: POST wire.SnapshotPath reads one tar back into
// the areas (snapshot.go says what they are and when it is refused).

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// snapshotPost handles POST /snapshot?mode=restore|add: the body is a
// tar as GET /snapshot answers, written in place. mode=restore first
// empties the areas that are not caches (the base directory, GOPATH
// but the caches in it); the caches keep their files and gain the
// tar's. Each file lands whole (a temporary file renamed over its
// path); a cache file already there with the same size is left as it is
// (cache entries are named by their content).
//
// Answers: 200 with a wire.Message; 409 busy (something runs; or ran
// meanwhile: restore again); 400 for a malformed tar or an entry outside
// the areas; 403 path_escape for a ".." name; 507 no_space; 500 else.
// After an error the sandbox holds part of the tar.
func (s *Server) snapshotPost(w http.ResponseWriter, r *http.Request, _ string) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-tar" {
		writeError(w, http.StatusUnsupportedMediaType, wire.CodeBadRequest, fmt.Sprintf("want a tar archive with Content-Type application/x-tar, got %q", ct))
		return
	}
	mode := r.URL.Query().Get("mode")
	if mode != wire.SnapshotModeRestore && mode != wire.SnapshotModeAdd {
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("mode %q: want %s or %s", mode, wire.SnapshotModeRestore, wire.SnapshotModeAdd))
		return
	}
	if !s.snapMu.TryLock() {
		writeError(w, http.StatusConflict, wire.CodeBusy, "Another snapshot or restore of this sandbox is under way: try again once it is done")
		return
	}
	defer s.snapMu.Unlock()
	what := "write a snapshot"
	if mode == wire.SnapshotModeRestore {
		what = "restore a snapshot"
	}
	before, err := s.quiet()
	if err != nil {
		s.snapshotRefused(w, what, err)
		return
	}
	start := time.Now()
	areas := s.snapAreas()
	if mode == wire.SnapshotModeRestore {
		for _, a := range areas {
			if a.cache {
				continue
			}
			if err := emptyArea(a, nestedIn(a, areas)); err != nil {
				s.snapshotWriteFailed(w, what, "", err)
				return
			}
		}
	}
	st, name, err := s.readSnapshot(r.Context(), tar.NewReader(r.Body), areas)
	if err == nil {
		err = s.stillQuiet(before)
	}
	s.log.Info("snapshot written", "mode", mode, "files", st.files, "bytes", st.bytes, "skipped", st.skipped,
		"duration_ms", float64(time.Since(start).Microseconds())/1000, "err", err)
	if err != nil {
		s.snapshotWriteFailed(w, what, name, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Message{Message: fmt.Sprintf("Wrote %d files (%d bytes; %d cache files were there already).", st.files, st.bytes, st.skipped)})
}

// errBadEntry and errEntryEscape: an entry the tar may not hold.
var (
	errBadEntry    = errors.New("not an entry of a snapshot")
	errEntryEscape = errors.New("a name with .. or an absolute name")
)

func (s *Server) snapshotWriteFailed(w http.ResponseWriter, what, name string, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBusy):
		writeError(w, http.StatusConflict, wire.CodeBusy, fmt.Sprintf("Cannot %s: %v (the sandbox may hold part of it: %s again)", what, err, strings.Fields(what)[0]))
	case errors.Is(err, errEntryEscape), rootEscape(err):
		writeError(w, http.StatusForbidden, wire.CodePathEscape, fmt.Sprintf("Cannot %s: entry %q: %v", what, name, err))
	case errors.Is(err, errBadEntry), errors.Is(err, tar.ErrHeader), errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Cannot %s: entry %q: %v", what, name, err))
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Cannot %s: %v", what, err))
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		writeError(w, http.StatusInsufficientStorage, wire.CodeNoSpace, fmt.Sprintf("Cannot %s: no space left at %q: the sandbox's disk is full", what, name))
	default:
		s.log.Error(what, "entry", name, "err", err)
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("Cannot %s: entry %q: %v", what, name, err))
	}
}

// readSnapshot writes the entries of tr into the areas. It returns the
// name of the entry an error stopped at.
func (s *Server) readSnapshot(ctx context.Context, tr *tar.Reader, areas []snapArea) (snapStats, string, error) {
	var st snapStats
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	type dirMode struct {
		root *os.Root
		rel  string
		mode fs.FileMode
		mt   time.Time
	}
	var dirs []dirMode
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, "", err
		}
		if ctx.Err() != nil {
			return st, hdr.Name, ctx.Err()
		}
		key, rel, _ := strings.Cut(strings.TrimSuffix(hdr.Name, "/"), "/")
		if path.IsAbs(hdr.Name) || slices.Contains(strings.Split(hdr.Name, "/"), "..") {
			return st, hdr.Name, errEntryEscape
		}
		i := slices.IndexFunc(areas, func(a snapArea) bool { return a.key == key })
		if i < 0 || rel == "" || path.Clean(rel) != rel {
			return st, hdr.Name, fmt.Errorf("%w: want a name under %s", errBadEntry, strings.Join(areaKeys(areas), "/, ")+"/")
		}
		a := areas[i]
		root := roots[a.key]
		if root == nil {
			if err := os.MkdirAll(a.dir, 0o755); err != nil {
				return st, hdr.Name, err
			}
			if root, err = os.OpenRoot(a.dir); err != nil {
				return st, hdr.Name, err
			}
			roots[a.key] = root
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(rel, 0o700); err != nil {
				return st, hdr.Name, err
			}
			dirs = append(dirs, dirMode{root, rel, perm, hdr.ModTime})
		case tar.TypeReg:
			if err := putSnapFile(root, a, rel, hdr, tr, &st); err != nil {
				return st, hdr.Name, err
			}
		case tar.TypeSymlink:
			if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
				return st, hdr.Name, err
			}
			if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return st, hdr.Name, err
			}
			if err := root.Symlink(hdr.Linkname, rel); err != nil {
				return st, hdr.Name, err
			}
			st.files++
		default:
			return st, hdr.Name, fmt.Errorf("%w: type %q (a snapshot holds files, directories and symlinks)", errBadEntry, hdr.Typeflag)
		}
	}
	// Directories get their modes last, deepest first, so a read-only one
	// did not stop its files from landing.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := d.root.Chmod(d.rel, d.mode); err != nil {
			return st, d.rel, err
		}
		_ = d.root.Chtimes(d.rel, d.mt, d.mt)
	}
	return st, "", nil
}

// rootEscape reports whether err is os.Root's refusal of a path that
// leads out of it (a symlink on the way; the error is not exported).
func rootEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func areaKeys(areas []snapArea) []string {
	var out []string
	for _, a := range areas {
		out = append(out, a.key)
	}
	return out
}

// putSnapFile writes a regular file entry whole: a temporary file beside
// it, renamed over it. In a cache a file of the same size already there
// is kept (the entry's bytes are skipped).
func putSnapFile(root *os.Root, a snapArea, rel string, hdr *tar.Header, r io.Reader, st *snapStats) error {
	if a.cache {
		if fi, err := root.Lstat(rel); err == nil && fi.Mode().IsRegular() && fi.Size() == hdr.Size {
			st.skipped++
			return nil
		}
	}
	dir := path.Dir(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".sandbox-snapshot-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, hdr.Size)
	if err == nil {
		err = f.Chmod(fs.FileMode(hdr.Mode).Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	_ = root.Chtimes(rel, hdr.ModTime, hdr.ModTime)
	st.files++
	st.bytes += hdr.Size
	return nil
}

// emptyArea removes what a holds but the areas nested in it (keep), and
// the directories on their way (emptyDir).
func emptyArea(a snapArea, keep []string) error {
	root, err := os.OpenRoot(a.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	return emptyDir(root, ".", keep)
}

// emptyDir removes what dir holds but the paths in keep and the
// directories on their way to them. A directory a command made
// unwritable or unsearchable gets its owner's bits back first (the server
// runs as their owner): dir itself as it is listed, one inside it when
// removing it is refused (removeTree).
func emptyDir(root *os.Root, dir string, keep []string) error {
	entries, err := ownedEntries(root, dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case slices.Contains(keep, p):
		case e.IsDir() && slices.ContainsFunc(keep, func(k string) bool { return strings.HasPrefix(k, p+"/") }):
			if err := emptyDir(root, p, keep); err != nil {
				return err
			}
		default:
			if err := removeTree(root, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeTree removes p and what is under it. When its modes refuse that,
// it empties p as emptyDir does, giving each directory its owner's bits,
// and removes it then.
func removeTree(root *os.Root, p string) error {
	if err := root.RemoveAll(p); err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	if err := emptyDir(root, p, nil); err != nil {
		return err
	}
	return root.Remove(p)
}

// ownedEntries lists directory dir, first giving it its owner's read,
// write and search bits; of anything but a directory it lists nothing.
func ownedEntries(root *os.Root, dir string) ([]fs.DirEntry, error) {
	fi, err := root.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o700 != 0o700 {
		if err := root.Chmod(dir, perm|0o700); err != nil {
			return nil, err
		}
	}
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
