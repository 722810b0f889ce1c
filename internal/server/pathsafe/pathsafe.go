package pathsafe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrEscape reports a name that resolves outside the base directory.
var ErrEscape = errors.New("path escapes the base directory")

// LinkEscapeError is the ErrEscape of a name whose resolution left the
// base directory through a symlink: Link (relative to the base) points at
// Target. errors.Is(err, ErrEscape) holds for it.
type LinkEscapeError struct {
	Name, Link, Target string
}

func (e *LinkEscapeError) Error() string {
	return fmt.Sprintf("resolve %q: symlink %s -> %s: %v", e.Name, e.Link, e.Target, ErrEscape)
}

func (e *LinkEscapeError) Unwrap() error { return ErrEscape }

// ErrInvalid reports a name that cannot name a file (it holds a NUL byte).
var ErrInvalid = errors.New("invalid path")

// maxLinks bounds the symlinks followed in one resolution, as Linux's
// MAXSYMLINKS does; more fail with an error wrapping syscall.ELOOP.
const maxLinks = 40

// Root is a base directory that names are resolved against.
type Root struct {
	root *os.Root
	dir  string // absolute, symlink-free path of the base directory
}

// Open opens dir as a Root. dir must exist and be a directory.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open base directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open base directory %s: %w", dir, err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open base directory %s: %w", dir, err)
	}
	return &Root{root: r, dir: real}, nil
}

// Dir is the absolute, symlink-free path of the base directory.
func (r *Root) Dir() string { return r.dir }

// OS is the os.Root every operation on a resolved name should go through.
func (r *Root) OS() *os.Root { return r.root }

// Close releases the base directory.
func (r *Root) Close() error { return r.root.Close() }

// Resolve turns a wire name into a slash-separated name relative to the
// base directory ("." for the base itself) that holds no symlink and no
// "..". Leading slashes are dropped, so "/a/b" means "a/b" under the base,
// as upstream's runtime does. Symlinks are followed as the kernel would:
// a relative target is taken from the link's directory, an absolute one
// must lie inside the base directory. Components that do not exist (yet)
// are kept as written.
//
// Errors: ErrEscape when the name or a symlink on the way leads outside
// the base (a *LinkEscapeError when a symlink was followed); ErrInvalid for a NUL byte; an error wrapping syscall.ELOOP
// after 40 symlinks; otherwise the failing Lstat or Readlink.
func (r *Root) Resolve(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("resolve %q: %w", name, ErrInvalid)
	}
	pending := strings.Split(strings.TrimLeft(name, "/"), "/")
	done := make([]string, 0, len(pending))
	missing := false // an earlier component does not exist: the rest is lexical
	links := 0
	var link, linkTarget string // the last symlink followed
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				if link != "" {
					return "", &LinkEscapeError{Name: name, Link: link, Target: linkTarget}
				}
				return "", fmt.Errorf("resolve %q: %w", name, ErrEscape)
			}
			done = done[:len(done)-1]
			continue
		}
		done = append(done, c)
		if missing {
			continue
		}
		cur := strings.Join(done, "/")
		fi, err := r.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			missing = true
			continue
		case err != nil:
			return "", fmt.Errorf("resolve %q: %w", name, err)
		case fi.Mode()&fs.ModeSymlink == 0:
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("resolve %q: too many symlinks: %w", name, syscall.ELOOP)
		}
		target, err := r.root.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", name, err)
		}
		done = done[:len(done)-1]
		link, linkTarget = cur, target
		if strings.HasPrefix(target, "/") {
			rel, ok := r.within(target)
			if !ok {
				return "", &LinkEscapeError{Name: name, Link: cur, Target: target}
			}
			done = done[:0]
			target = rel
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// within maps an absolute path that lies lexically inside the base
// directory to the slash-separated rest of it ("" for the base itself).
func (r *Root) within(abs string) (string, bool) {
	clean := filepath.Clean(abs)
	if clean == r.dir {
		return "", true
	}
	prefix := r.dir
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	rest, ok := strings.CutPrefix(clean, prefix)
	return rest, ok
}
