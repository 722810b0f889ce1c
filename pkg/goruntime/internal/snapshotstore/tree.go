package snapshotstore

// Trees: snapshots the backend layers sandboxes on (MethodOverlay). A
// tree is extracted once, sealed (Commit: every file root's, set-id bits
// cleared, its size counted), and from then on only read: each sandbox
// made from it shows it, read-only, below a writable layer of its own on
// its own disk. So a tree must outlive every sandbox layered on it,
// whatever happens to its snapshot: each such sandbox is recorded in the
// snapshot's users/ directory (Use) as it is layered, and a snapshot
// deleted or expired while one of them lives is retired (kept, counted
// against the quota, not listed nor opened) until the last is gone. A
// fork's snapshot is Hidden: it exists for its forks only and goes with
// the last of them.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// useGrace is how long a hold (Temp.Hold) keeps a snapshot without
// being released: far longer than starting forks takes, so that only a
// process that died holding one leaves it to expire.
const useGrace = 10 * time.Minute

// holdPrefix starts the names of holds among a snapshot's users.
const holdPrefix = "hold-"

// NewTreeTemp starts a tree: Tree is where the tar Write is sent to must
// be extracted (by the caller, through Sink).
func (s Store) NewTreeTemp() (*Temp, error) {
	held, err := s.Prune()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.tmp(), 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	dir, err := os.MkdirTemp(s.tmp(), "tree-")
	if err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tree"), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	return &Temp{Dir: dir, max: s.Quota, store: s, held: held}, nil
}

// Tree is the directory a tree temp is extracted into.
func (t *Temp) Tree() string { return filepath.Join(t.Dir, "tree") }

// Tree is the tree of a snapshot of MethodOverlay.
func (s Store) Tree(m Meta) string { return filepath.Join(s.dir(m.Owner, m.ID), "tree") }

// seal makes the tree at dir what layering needs and the host may keep:
// every file root's (uid and gid 0), no set-user-ID or set-group-ID bit,
// no device node (a sandbox cannot make one but an overlay's whiteout,
// which means nothing in a tree; one in a tar that a taken-over sandbox
// forged is not kept), and returns the disk it holds (allocated blocks).
func seal(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if f := st.Mode & syscall.S_IFMT; f == syscall.S_IFCHR || f == syscall.S_IFBLK {
			return os.Remove(p)
		}
		size += st.Blocks * 512
		if st.Uid != 0 || st.Gid != 0 {
			if err := os.Lchown(p, 0, 0); err != nil {
				return err
			}
		}
		if m := st.Mode; m&syscall.S_IFMT != syscall.S_IFLNK && m&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			if err := syscall.Chmod(p, m&^(syscall.S_IFMT|syscall.S_ISUID|syscall.S_ISGID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("seal the snapshot's tree: %w", err)
	}
	return size, nil
}

// Use records that the sandbox id is layered on m's tree: the tree
// stays until that sandbox is gone (Live). Its directory must exist
// already.
func (s Store) Use(m Meta, sandboxID string) error {
	return use(s.dir(m.Owner, m.ID), filepath.Base(sandboxID))
}

func use(dir, name string) error {
	if err := os.MkdirAll(filepath.Join(dir, "users"), 0o700); err != nil {
		return fmt.Errorf("record the snapshot's user: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users", name), nil, 0o600); err != nil {
		return fmt.Errorf("record the snapshot's user: %w", err)
	}
	return nil
}

// Hold keeps the snapshot t becomes (Commit) from being removed while no
// sandbox is layered on it yet, until Release: a fork's snapshot between
// its commit and its forks. It returns the hold's name.
func (t *Temp) Hold() (string, error) {
	name := holdPrefix + NewID()
	return name, use(t.Dir, name)
}

// Release ends the hold name on m (Hold).
func (s Store) Release(m Meta, name string) error {
	err := os.Remove(filepath.Join(s.dir(m.Owner, m.ID), "users", filepath.Base(name)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release the snapshot: %w", err)
	}
	return nil
}

// inUse reports whether the snapshot in dir is held (Hold, for at most
// useGrace) or a sandbox layered on it lives (Live).
func (s Store) inUse(dir string, m Meta, now time.Time) bool {
	if m.Method != MethodOverlay {
		return false
	}
	users, _ := os.ReadDir(filepath.Join(dir, "users"))
	for _, u := range users {
		if strings.HasPrefix(u.Name(), holdPrefix) {
			if fi, err := u.Info(); err == nil && now.Sub(fi.ModTime()) < useGrace {
				return true
			}
			continue
		}
		if s.Live != nil && s.Live(u.Name()) {
			return true
		}
	}
	return false
}

// end removes the snapshot in dir, or, while sandboxes are layered on
// it, retires it. The caller holds the lock.
func (s Store) end(dir string, m Meta, now time.Time) error {
	if !s.inUse(dir, m, now) {
		return s.remove(dir)
	}
	if m.Retired || m.Hidden {
		return nil
	}
	m.Retired = true
	if err := writeJSON(filepath.Join(dir, "meta.json.tmp"), m); err != nil {
		return fmt.Errorf("retire snapshot: %w", err)
	}
	if err := os.Rename(filepath.Join(dir, "meta.json.tmp"), filepath.Join(dir, "meta.json")); err != nil {
		return fmt.Errorf("retire snapshot: %w", err)
	}
	return nil
}
