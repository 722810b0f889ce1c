package server

// Taking a snapshot: GET wire.SnapshotPath writes the areas as one tar
// (snapshot.go says what it holds and when it is refused).

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// snapshotGet handles GET /snapshot: a tar of the sandbox's files
// (snapAreas), streamed, with its status in trailers. Refused with 409
// (busy) before anything is sent while something runs.
func (s *Server) snapshotGet(w http.ResponseWriter, r *http.Request, _ string) {
	if !s.snapMu.TryLock() {
		writeError(w, http.StatusConflict, wire.CodeBusy, "Another snapshot or restore of this sandbox is under way: try again once it is done")
		return
	}
	defer s.snapMu.Unlock()
	before, err := s.quiet()
	if err != nil {
		s.snapshotRefused(w, "take a snapshot", err)
		return
	}
	start := time.Now()
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Trailer", wire.SnapshotStatusTrailer+", "+wire.SnapshotErrorTrailer)
	w.WriteHeader(http.StatusOK)
	st, err := s.writeSnapshot(r.Context(), w)
	if err == nil {
		err = s.stillQuiet(before)
	}
	status := wire.SnapshotStatusOK
	if err != nil {
		status = string(wire.CodeInternal)
		if errors.Is(err, errBusy) {
			status = string(wire.CodeBusy)
		}
		w.Header().Set(wire.SnapshotErrorTrailer, err.Error())
	}
	w.Header().Set(wire.SnapshotStatusTrailer, status)
	s.log.Info("snapshot taken", "status", status, "files", st.files, "bytes", st.bytes, "skipped", st.skipped,
		"duration_ms", float64(time.Since(start).Microseconds())/1000, "err", err)
}

func (s *Server) snapshotRefused(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, errBusy) {
		writeError(w, http.StatusConflict, wire.CodeBusy, fmt.Sprintf("Cannot %s: %v", what, err))
		return
	}
	s.log.Error(what, "err", err)
	writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("Cannot %s: %v", what, err))
}

type snapStats struct{ files, bytes, skipped int64 }

// writeSnapshot writes the tar of the sandbox's files to w.
func (s *Server) writeSnapshot(ctx context.Context, w io.Writer) (snapStats, error) {
	var st snapStats
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	areas := s.snapAreas()
	for _, a := range areas {
		if err := s.writeArea(ctx, tw, a, nestedIn(a, areas), &st); err != nil {
			return st, err
		}
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, bw.Flush()
}

// errChanged: a file changed while it was read.
var errChanged = fmt.Errorf("%w: a file changed while the snapshot was taken", errBusy)

// writeArea writes a's entries to tw, but those under skip.
func (s *Server) writeArea(ctx context.Context, tw *tar.Writer, a snapArea, skip []string, st *snapStats) error {
	root, err := os.OpenRoot(a.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", a.dir, err)
	}
	defer root.Close()
	written := map[string]bool{} // directories written (cache areas: on demand)
	// dirHeader writes the header of directory p (and, in a cache area,
	// of its parents first).
	var dirHeader func(p string) error
	dirHeader = func(p string) error {
		if p == "." || written[p] {
			return nil
		}
		if a.cache {
			if err := dirHeader(path.Dir(p)); err != nil {
				return err
			}
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		written[p] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: a.key + "/" + p + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
	}
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != "." && errors.Is(err, fs.ErrNotExist) {
				return nil // removed since its directory was read
			}
			return fmt.Errorf("read %s: %w", filepath.Join(a.dir, p), err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if slices.Contains(skip, p) {
			return fs.SkipDir
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", filepath.Join(a.dir, p), err)
		}
		if a.cache && !fi.IsDir() && ctime(fi).Before(s.cacheEpoch) {
			return nil // the cache the sandbox started with
		}
		switch {
		case fi.IsDir():
			if a.cache {
				return nil // written with the first file under it
			}
			return dirHeader(p)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return fmt.Errorf("read link %s: %w", filepath.Join(a.dir, p), err)
			}
			if err := dirHeader(path.Dir(p)); err != nil {
				return err
			}
			st.files++
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a.key + "/" + p, Linkname: target, Mode: 0o777, ModTime: fi.ModTime()})
		case fi.Mode().IsRegular():
			if err := dirHeader(path.Dir(p)); err != nil {
				return err
			}
			return snapFile(tw, root, a, p, st)
		}
		st.skipped++ // a socket, FIFO or device
		return nil
	})
}

// snapFile writes the regular file p of area a to tw: its size as its
// open descriptor has it, then exactly that many bytes (a file that
// shrank meanwhile fails with errChanged). O_NONBLOCK: a FIFO swapped in
// for it cannot hold the snapshot open; the type is checked on the
// descriptor.
func snapFile(tw *tar.Writer, root *os.Root, a snapArea, p string, st *snapStats) error {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(a.dir, p), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Join(a.dir, p), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s is no longer a regular file)", errChanged, filepath.Join(a.dir, p))
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: a.key + "/" + p, Size: fi.Size(), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.CopyN(tw, f, fi.Size())
	if err == io.EOF {
		return fmt.Errorf("%w (%s shrank from %d to %d bytes)", errChanged, filepath.Join(a.dir, p), fi.Size(), n)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(a.dir, p), err)
	}
	st.files++
	st.bytes += n
	return nil
}
