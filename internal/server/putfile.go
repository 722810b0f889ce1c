package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"
)

// Why putFile failed, for the handlers to answer each its own way.
var (
	errParentNotDir = errors.New("a parent is not a directory")
	errIsDirectory  = errors.New("it is a directory")
	errOverLimit    = errors.New("over the upload limit")
)

// bodyError is a failure to read the request body (the client's side),
// as opposed to a failure to write the file (the sandbox's side).
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// putFile writes the content of r to rel, a name pathsafe.Root.Resolve
// returned (not "."), through a temporary file beside it that is renamed
// over it: a reader never sees half a file, and a symlink at rel is
// replaced, not followed. Missing parent directories are created (0755).
// perm is the new file's mode; 0 keeps an existing file's mode, else 0644.
// At most limit bytes are taken from r.
//
// Errors wrap errParentNotDir, errIsDirectory, errOverLimit (r had more
// than limit bytes), a *bodyError (reading r failed), or the failing
// file-system call (fs.ErrPermission, ENOSPC, ...). On error nothing is
// left behind but the parents it created.
func (s *Server) putFile(rel string, r io.Reader, perm fs.FileMode, limit int64) (int64, error) {
	root := s.root().OS()
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if err := s.makeDirs(dir); err != nil {
		return 0, err
	}
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return 0, errIsDirectory
		}
		if perm == 0 && fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
	}
	if perm == 0 {
		perm = 0o644
	}
	tmp := path.Join(dir, fmt.Sprintf(".%s.upload-%016x", base, rand.Uint64()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, readErr, writeErr := copyChunks(f, io.LimitReader(r, limit+1), bufferSize(limit))
	if cerr := f.Close(); writeErr == nil {
		writeErr = cerr
	}
	switch {
	case readErr != nil:
		err = &bodyError{readErr}
	case writeErr != nil:
		err = writeErr
	case n > limit:
		err = errOverLimit
	default:
		// The open applied the umask; the archive's mode is what the
		// caller asked for (tar without --same-permissions does the same).
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return n, err
	}
	return n, nil
}

// makeDirs creates rel (a resolved name) and its missing parents, 0755.
// Errors wrap errParentNotDir when a file is in the way, else the failing
// mkdir's error.
func (s *Server) makeDirs(rel string) error {
	err := s.root().OS().MkdirAll(rel, 0o755)
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", rel, errParentNotDir)
	}
	return err
}
