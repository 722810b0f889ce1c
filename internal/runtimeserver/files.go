package runtimeserver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/pathsafe"
)

// copyBufferSize is the buffer uploads are copied to disk with.
const copyBufferSize = 1 << 20

// multipartSlack is how many bytes of multipart framing an upload body may
// carry beyond the file's own cap.
const multipartSlack = 1 << 20

func accessDenied(w http.ResponseWriter) {
	writeJSON(w, http.StatusForbidden, map[string]string{"message": "Access denied"})
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
	mr, err := r.MultipartReader()
	if err != nil {
		validationError(w, "file", "missing", fmt.Sprintf("Field required (a multipart/form-data body with a part named \"file\"): %v", err))
		return
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			validationError(w, "file", "missing", "Field required")
			return
		}
		if err != nil {
			s.uploadFailed(w, "", err)
			return
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		s.saveUpload(w, part)
		return
	}
}

// rawFilename is a part's filename parameter as sent, directories kept
// (multipart.Part.FileName keeps only the last element).
func rawFilename(contentDisposition string) string {
	_, params, err := mime.ParseMediaType(contentDisposition)
	if err != nil {
		return ""
	}
	return params["filename"]
}

func (s *Server) saveUpload(w http.ResponseWriter, part *multipart.Part) {
	name := rawFilename(part.Header.Get("Content-Disposition"))
	if name == "" {
		validationError(w, "file", "value_error", "the \"file\" part has no filename")
		return
	}
	rel, err := s.root.Resolve(name)
	switch {
	case refused(err):
		accessDenied(w)
		return
	case err != nil:
		s.uploadFailed(w, name, err)
		return
	case rel == ".":
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("Filename %q names the base directory", name)})
		return
	}
	root := s.root.OS()
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			writeJSON(w, http.StatusConflict, map[string]string{"message": fmt.Sprintf("Cannot create directory for %q: a parent is not a directory", name)})
			return
		}
		s.uploadFailed(w, name, err)
		return
	}
	perm := fs.FileMode(0o644)
	if fi, err := root.Stat(rel); err == nil {
		if fi.IsDir() {
			writeJSON(w, http.StatusConflict, map[string]string{"message": fmt.Sprintf("Cannot upload %q: it is a directory", name)})
			return
		}
		perm = fi.Mode().Perm()
	}
	tmp := path.Join(dir, fmt.Sprintf(".%s.upload-%016x", base, rand.Uint64()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		s.uploadFailed(w, name, err)
		return
	}
	buf := make([]byte, copyBufferSize)
	n, err := io.CopyBuffer(f, io.LimitReader(part, s.cfg.MaxUploadBytes+1), buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig), err == nil && n > s.cfg.MaxUploadBytes:
		_ = root.Remove(tmp)
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{
			"message": fmt.Sprintf("File %q exceeds the upload limit of %d bytes", name, s.cfg.MaxUploadBytes)})
		return
	case err != nil:
		_ = root.Remove(tmp)
		s.uploadFailed(w, name, err)
		return
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		s.uploadFailed(w, name, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": fmt.Sprintf("File '%s' uploaded successfully.", name)})
}

func (s *Server) uploadFailed(w http.ResponseWriter, name string, err error) {
	s.log.Error("upload", "name", name, "err", err)
	writeJSON(w, http.StatusInternalServerError, map[string]string{"message": fmt.Sprintf("File upload failed: %v", err)})
}

// download handles GET /download/{path}: the file's bytes as
// application/octet-stream (Range requests honoured).
func (s *Server) download(w http.ResponseWriter, r *http.Request, name string) {
	notFound := func() { writeJSON(w, http.StatusNotFound, map[string]string{"message": "File not found"}) }
	rel, err := s.root.Resolve(name)
	switch {
	case refused(err):
		accessDenied(w)
		return
	case err != nil:
		notFound()
		return
	}
	f, err := s.root.OS().Open(rel)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			accessDenied(w)
			return
		}
		notFound()
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		notFound()
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(rel)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// fileEntry is one /list entry.
type fileEntry struct {
	Name    string  `json:"name"`
	Size    int64   `json:"size"`
	Type    string  `json:"type"`
	ModTime float64 `json:"mod_time"`
}

// list handles GET /list/{path}. A symlink is reported as what it points
// to when that lies inside the base directory, otherwise as a "file" with
// the link's own size and time.
func (s *Server) list(w http.ResponseWriter, _ *http.Request, name string) {
	notDir := func() { writeJSON(w, http.StatusNotFound, map[string]string{"message": "Path is not a directory"}) }
	rel, err := s.root.Resolve(name)
	switch {
	case refused(err):
		accessDenied(w)
		return
	case err != nil:
		notDir()
		return
	}
	root := s.root.OS()
	fi, err := root.Stat(rel)
	if err != nil || !fi.IsDir() {
		notDir()
		return
	}
	d, err := root.Open(rel)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": fmt.Sprintf("List files failed: %v", err)})
		return
	}
	dirents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": fmt.Sprintf("List files failed: %v", err)})
		return
	}
	entries := make([]fileEntry, 0, len(dirents))
	for _, de := range dirents {
		info, err := de.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err := s.root.Resolve(path.Join(rel, de.Name())); err == nil {
				if ti, err := root.Stat(target); err == nil {
					info = ti
				}
			}
		}
		kind := "file"
		if info.IsDir() {
			kind = "directory"
		}
		entries = append(entries, fileEntry{
			Name:    de.Name(),
			Size:    info.Size(),
			Type:    kind,
			ModTime: float64(info.ModTime().UnixNano()) / 1e9,
		})
	}
	slices.SortFunc(entries, func(a, b fileEntry) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, entries)
}

// exists handles GET /exists/{path}.
func (s *Server) exists(w http.ResponseWriter, _ *http.Request, name string) {
	rel, err := s.root.Resolve(name)
	if refused(err) {
		accessDenied(w)
		return
	}
	found := false
	if err == nil {
		_, serr := s.root.OS().Stat(rel)
		found = serr == nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": name, "exists": found})
}

// mkdirAll creates dir and its parents.
func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
