package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/pathsafe"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// copyBufferSize is the buffer uploads are copied to disk with.
const copyBufferSize = 1 << 20

// multipartSlack is how many bytes of multipart framing an upload body may
// carry beyond the file's own cap.
const multipartSlack = 1 << 20

// accessDenied answers 403 for a name that escapes the base directory
// (or cannot name a file), err being why: upstream's exact message, and
// when a symlink was the way out, a reason naming it.
func accessDenied(w http.ResponseWriter, err error) {
	m := wire.Message{Message: "Access denied", Code: wire.CodePathEscape}
	var le *pathsafe.LinkEscapeError
	if errors.As(err, &le) {
		m.Reason = fmt.Sprintf("%s is a symlink to %s, outside the base directory", le.Link, le.Target)
	}
	writeJSON(w, http.StatusForbidden, m)
}

// permissionDeniedPrefix starts the message of a 403 for a name inside the
// base that the server may not read or write (EACCES, EPERM: e.g. a file
// a command made mode 000), so clients can tell it from an escape.
const permissionDeniedPrefix = "Permission denied"

// permissionDenied answers 403 with a message starting with
// permissionDeniedPrefix and naming the file.
func permissionDenied(w http.ResponseWriter, name string) {
	writeError(w, http.StatusForbidden, wire.CodePermissionDenied, fmt.Sprintf("%s: %q is not accessible to the sandbox's user (check its mode)", permissionDeniedPrefix, name))
}

// refused reports whether a resolution error means the name must be
// refused with 403: it leads outside the base or cannot name a file.
func refused(err error) bool {
	return errors.Is(err, pathsafe.ErrEscape) || errors.Is(err, pathsafe.ErrInvalid)
}

// upload handles POST /upload: a multipart form whose part "file" is
// streamed to a temporary file beside its target and renamed over it.
// The part's raw filename may hold a relative sub-path; missing parent
// directories are created.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, _ string) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes+multipartSlack)
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		validationError(w, "file", "missing", fmt.Sprintf("Field required (want a multipart/form-data body with a part named \"file\", got Content-Type %q)", r.Header.Get("Content-Type")))
		return
	}
	fr := newFormReader(r.Body, params["boundary"])
	for {
		hdr, part, err := fr.next()
		if errors.Is(err, io.EOF) {
			validationError(w, "file", "missing", "Field required")
			return
		}
		if err != nil {
			s.uploadBodyFailed(w, err)
			return
		}
		_, dparams, _ := mime.ParseMediaType(hdr.Get("Content-Disposition"))
		if dparams["name"] != "file" {
			continue
		}
		s.saveUpload(w, dparams["filename"], part)
		return
	}
}

// uploadBodyFailed answers an upload whose body could not be read: 413
// past the size cap, 400 for a malformed body.
func (s *Server) uploadBodyFailed(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Upload exceeds the limit of %d bytes", s.cfg.MaxUploadBytes))
		return
	}
	writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Malformed upload body: %v", err))
}

// saveUpload streams part to a temporary file beside name's target and
// renames it over the target. name is the part's raw filename parameter:
// mime/multipart's FileName would strip its directories.
func (s *Server) saveUpload(w http.ResponseWriter, name string, part io.Reader) {
	if name == "" {
		validationError(w, "file", "value_error", "the \"file\" part has no filename")
		return
	}
	rel, err := s.root().Resolve(name)
	switch {
	case refused(err):
		accessDenied(w, err)
		return
	case err != nil:
		s.uploadFailed(w, name, err)
		return
	case rel == ".":
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Filename %q names the base directory", name))
		return
	}
	_, err = s.putFile(rel, part, 0, s.cfg.MaxUploadBytes)
	var be *bodyError
	switch {
	case errors.As(err, &be):
		s.uploadBodyFailed(w, be.err)
		return
	case errors.Is(err, errParentNotDir):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot create directory for %q: a parent is not a directory", name))
		return
	case errors.Is(err, errIsDirectory):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot upload %q: it is a directory", name))
		return
	case errors.Is(err, errOverLimit):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("File %q exceeds the upload limit of %d bytes", name, s.cfg.MaxUploadBytes))
		return
	case err != nil:
		s.uploadFailed(w, name, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Message{Message: fmt.Sprintf("File '%s' uploaded successfully.", name)})
}

// bufferSize is copyChunks' buffer for a file of at most limit bytes:
// copyBufferSize, or less for a smaller file (one archive of 20,000 small
// files allocated and cleared 20 GiB of buffers: 13-20 s, against 0.3 s
// for tar -x of the same archive).
func bufferSize(limit int64) int {
	if limit < 0 || limit >= copyBufferSize {
		return copyBufferSize
	}
	return int(limit) + 1
}

// copyChunks copies src to dst in chunks of size bytes, so the file
// sees few large writes, and tells read errors from write errors.
func copyChunks(dst io.Writer, src io.Reader, size int) (n int64, readErr, writeErr error) {
	buf := make([]byte, size)
	for {
		// Fill the buffer; only io.EOF from src ends the copy cleanly (a
		// truncated chunked body reports io.ErrUnexpectedEOF, an error).
		m := 0
		var err error
		for m < len(buf) && err == nil {
			var k int
			k, err = src.Read(buf[m:])
			m += k
		}
		if m > 0 {
			if _, werr := dst.Write(buf[:m]); werr != nil {
				return n, nil, werr
			}
			n += int64(m)
		}
		switch {
		case errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			return n, nil, nil
		case err != nil:
			return n, err, nil
		}
	}
}

// uploadFailed answers a file that could not be written: 403 when the
// sandbox's user may not, 409 for a symlink loop on its path, 507 when
// the disk is full (naming the file asked for, not the temporary one),
// else 500.
func (s *Server) uploadFailed(w http.ResponseWriter, name string, err error) {
	switch {
	case errors.Is(err, fs.ErrPermission):
		permissionDenied(w, name)
		return
	case errors.Is(err, syscall.ELOOP):
		writeError(w, http.StatusConflict, wire.CodeConflict, fmt.Sprintf("Cannot write %q: a symlink loop is on its path (%v); remove the links", name, err))
		return
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		writeError(w, http.StatusInsufficientStorage, wire.CodeNoSpace, fmt.Sprintf("No space left writing %q: the sandbox's disk quota (bytes or inodes) is used up; delete files with a command first", name))
		return
	}
	s.log.Error("upload", "name", name, "err", err)
	writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("File upload failed: %v", err))
}

// download handles GET /download/{path}: the file's bytes as
// application/octet-stream (Range requests honoured). Only regular files
// are served; anything else is 404 as upstream (whose os.path.isfile check
// answers "File not found"), with a message naming what the path is. The
// file is opened with O_NONBLOCK so a named pipe or a device cannot hold
// the request open waiting for a writer; the type is checked on the opened
// descriptor, so a swap between the check and the open changes nothing.
func (s *Server) download(w http.ResponseWriter, r *http.Request, name string) {
	notFound := func(msg string) { writeError(w, http.StatusNotFound, wire.CodeNotFound, msg) }
	rel, err := s.root().Resolve(name)
	switch {
	case refused(err):
		accessDenied(w, err)
		return
	case errors.Is(err, fs.ErrPermission):
		permissionDenied(w, name)
		return
	case err != nil:
		notFound("File not found")
		return
	}
	root := s.root().OS()
	// Stat first, so a special file is refused without being opened at all
	// (opening some devices has effects even with O_NONBLOCK).
	if fi, err := root.Stat(rel); err == nil && !fi.Mode().IsRegular() {
		notFound(notRegular(fi.Mode()))
		return
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			permissionDenied(w, name)
			return
		}
		notFound("File not found")
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		notFound("File not found")
		return
	case !fi.Mode().IsRegular():
		notFound(notRegular(fi.Mode()))
		return
	}
	// O_NONBLOCK has no effect on reads of a regular file.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(rel)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// notRegular is the 404 message for a path that exists but is not a
// regular file.
func notRegular(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "File not found: the path is a directory"
	case m&fs.ModeNamedPipe != 0:
		return "File not found: the path is a named pipe, not a regular file"
	case m&fs.ModeSocket != 0:
		return "File not found: the path is a socket, not a regular file"
	case m&fs.ModeDevice != 0:
		return "File not found: the path is a device, not a regular file"
	}
	return "File not found: the path is not a regular file"
}

// list handles GET /list/{path}. A symlink is reported as what it points
// to when that lies inside the base directory, otherwise as a "file" with
// the link's own size and time.
func (s *Server) list(w http.ResponseWriter, _ *http.Request, name string) {
	notDir := func() { writeError(w, http.StatusNotFound, wire.CodeNotFound, "Path is not a directory") }
	rel, err := s.root().Resolve(name)
	switch {
	case refused(err):
		accessDenied(w, err)
		return
	case errors.Is(err, fs.ErrPermission):
		permissionDenied(w, name)
		return
	case err != nil:
		notDir()
		return
	}
	root := s.root().OS()
	fi, err := root.Stat(rel)
	if err != nil || !fi.IsDir() {
		notDir()
		return
	}
	d, err := root.Open(rel)
	if errors.Is(err, fs.ErrPermission) {
		permissionDenied(w, name)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("List files failed: %v", err))
		return
	}
	dirents, err := d.ReadDir(-1)
	d.Close()
	if errors.Is(err, fs.ErrPermission) {
		permissionDenied(w, name)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("List files failed: %v", err))
		return
	}
	entries := make([]wire.FileEntry, 0, len(dirents))
	for _, de := range dirents {
		info, err := de.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err := s.root().Resolve(path.Join(rel, de.Name())); err == nil {
				if ti, err := root.Stat(target); err == nil {
					info = ti
				}
			}
		}
		kind := "file"
		if info.IsDir() {
			kind = "directory"
		}
		entries = append(entries, wire.FileEntry{
			Name:    de.Name(),
			Size:    info.Size(),
			Type:    kind,
			ModTime: float64(info.ModTime().UnixNano()) / 1e9,
		})
	}
	slices.SortFunc(entries, func(a, b wire.FileEntry) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, entries)
}

// exists handles GET /exists/{path}.
func (s *Server) exists(w http.ResponseWriter, _ *http.Request, name string) {
	rel, err := s.root().Resolve(name)
	if refused(err) {
		accessDenied(w, err)
		return
	}
	found := false
	if err == nil {
		_, serr := s.root().OS().Stat(rel)
		found = serr == nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": name, "exists": found})
}

// mkdirAll creates dir and its parents.
func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
