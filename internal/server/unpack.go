package server

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/pathsafe"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// tarSlack is how many bytes of tar headers and padding an /unpack body
// may carry beyond its files' content, which --max-upload-bytes caps.
const tarSlack = 16 << 20

// unpack handles POST /unpack (our extension): the body is a tar archive
// (Content-Type application/x-tar) of regular files and directories,
// written under the base directory as `tar -x --no-same-owner -m` would
// there, without starting a process: each file lands whole (a temporary
// file renamed over its path, so a symlink at the path is replaced, not
// followed), with the entry's permission bits and the current time;
// missing parents are created; symlinks on a parent's path are followed
// only inside the base directory. Entries are written in order and an
// error stops the rest (those written stay, as with tar).
//
// Answers: 200 with a wire.Message; 400 (bad_request) for a malformed
// archive or an entry that is not a regular file or directory; 403
// (path_escape) for a name outside the base directory; 409 (conflict)
// when what earlier commands left is in the way (a symlink out or a
// symlink loop, a file or directory); 413 (too_large) when the files'
// content is over --max-upload-bytes; 507 (no_space) when the disk quota is
// used up; 500 for another failed write.
func (s *Server) unpack(w http.ResponseWriter, r *http.Request, _ string) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-tar" {
		writeError(w, http.StatusUnsupportedMediaType, wire.CodeBadRequest, fmt.Sprintf("want a tar archive with Content-Type application/x-tar, got %q", ct))
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes+tarSlack)
	if files, ok := s.unpackTar(w, tar.NewReader(body)); ok {
		writeJSON(w, http.StatusOK, wire.Message{Message: fmt.Sprintf("Unpacked %d files.", files)})
	}
}

// unpackTar writes tr's entries in order as unpack describes and
// returns how many files it wrote; on the first that cannot be (or a
// malformed archive) it answers the error and returns ok false.
func (s *Server) unpackTar(w http.ResponseWriter, tr *tar.Reader) (files int64, ok bool) {
	var content int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, true
		}
		if err != nil {
			s.unpackBodyFailed(w, files, err)
			return files, false
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		default:
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Cannot unpack %q: only regular files and directories are accepted (type %q)", hdr.Name, hdr.Typeflag))
			return files, false
		}
		if hasDotDot(hdr.Name) {
			accessDenied(w, nil) // an archive names files under the base, never beside it
			return files, false
		}
		rel, err := s.unpackTarget(hdr.Name)
		if err != nil {
			s.unpackFailed(w, hdr.Name, err)
			return files, false
		}
		if hdr.Typeflag == tar.TypeDir {
			if rel != "." {
				if err := s.makeDirs(rel); err != nil {
					s.unpackFailed(w, hdr.Name, err)
					return files, false
				}
			}
			continue
		}
		if rel == "." {
			s.unpackFailed(w, hdr.Name, errIsDirectory)
			return files, false
		}
		content += hdr.Size
		if content > s.cfg.MaxUploadBytes {
			s.unpackFailed(w, hdr.Name, errOverLimit)
			return files, false
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		if perm == 0 {
			perm = 0o644
		}
		if _, err := s.putFile(rel, tr, perm, hdr.Size); err != nil {
			s.unpackFailed(w, hdr.Name, err)
			return files, false
		}
		files++
	}
}

// unpackTarget resolves an entry's name to where it is written: its
// parent is resolved (symlinks followed, inside the base directory only);
// its last element is kept as written, so a symlink there is replaced.
// The name has no ".." element. Errors are Resolve's: pathsafe.ErrEscape
// means a symlink on the way leads outside the base directory.
func (s *Server) unpackTarget(name string) (string, error) {
	clean := path.Clean("/" + strings.TrimLeft(name, "/"))
	dir, base := path.Split(clean)
	parent, err := s.root().Resolve(dir)
	if err != nil {
		return "", err
	}
	if base == "" {
		return parent, nil
	}
	return path.Join(parent, base), nil
}

// hasDotDot reports whether a slash-separated name has a ".." element.
func hasDotDot(name string) bool {
	for _, e := range strings.Split(name, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// unpackBodyFailed answers an archive that could not be read: 413 past
// the body's cap, 400 for a malformed archive.
func (s *Server) unpackBodyFailed(w http.ResponseWriter, done int64, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Archive exceeds the limit of %d bytes of content (after %d files)", s.cfg.MaxUploadBytes, done))
		return
	}
	writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Malformed tar archive after %d files: %v", done, err))
}

// unpackFailed answers an entry that could not be written.
func (s *Server) unpackFailed(w http.ResponseWriter, name string, err error) {
	var be *bodyError
	switch {
	case errors.As(err, &be):
		s.unpackBodyFailed(w, 0, be.err)
	case errors.Is(err, pathsafe.ErrEscape):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot unpack %q: a symlink on its path leads outside the work directory (%v); remove it or write the file elsewhere", name, err))
	case refused(err):
		accessDenied(w, err)
	case errors.Is(err, errParentNotDir):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot unpack %q: a file is where its path needs a directory (%v)", name, err))
	case errors.Is(err, errIsDirectory):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot unpack %q: a directory is in the way", name))
	case errors.Is(err, errOverLimit):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Archive exceeds the limit of %d bytes of content at %q", s.cfg.MaxUploadBytes, name))
	default:
		s.uploadFailed(w, name, err)
	}
}
