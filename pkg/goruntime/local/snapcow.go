package local

// Copy-on-write snapshots (method overlay): where sandboxes have disks of
// their own on the host (root, with the disk quota and host uids of
// their own), a snapshot is a sealed directory tree in the store
// (pkg/goruntime/internal/snapshotstore's tree.go), and a sandbox made from it (a fork,
// OpenSnapshot, a handle FromSnapshot) has its disk layered over the
// tree (internal/disk's layers.go): /app and HOME show the tree below an
// empty upper directory of the sandbox's own, and GOCACHE shows the
// tree's build cache entries between its own and the seed. Making one
// copies nothing; what it changes is copied up into its own disk. It is
// a pool sandbox layered in place when the warm pool has one
// (snappool.go), else a start layered from the outset (withLower).
//
// Elsewhere (a user's memory disks) the method stays copy (snapcopy.go):
// the files the sandbox's uid must be able to write would have to be
// shown as its own, and a user cannot map the ids of a file system it did
// not mount (an idmapped mount of the host's file system needs root), nor
// share one tmpfs between sandboxes whose mount namespaces are their own.
//
// The files leave the sandbox as they do for a copy: as one tar written
// by the sandbox's own processes (take), which the host extracts into the
// tree as root, in a fresh directory only root reaches, with GNU tar's
// defences (no absolute names, no "..", a symlink to such a place made
// only once every file is in) and without extended attributes; the tree
// is then sealed (every file root's, no set-id bit) and never written
// again.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	snapshot "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/snapshotstore"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

// layersSnapshots reports whether this backend keeps snapshots as trees
// and layers sandboxes on them: its sandboxes have disks on the host
// and host uids of their own.
func (sn snapshotter) layersSnapshots() bool {
	b := sn.b
	return b.host.diskQuota && !b.host.memoryDisk && b.host.hostUID && os.Geteuid() == 0
}

// snapshotMethod is how this backend keeps the snapshots it takes.
func (sn snapshotter) snapshotMethod() string {
	if sn.layersSnapshots() {
		return snapshot.MethodOverlay
	}
	return snapshot.MethodCopy
}

// treeLayers is how a disk (diskLayout) is layered over a tree: the tree
// holds what take writes, paths as the sandbox sees them from /.
func treeLayers(tree string) disk.Layers {
	var l layout // relative paths
	return disk.Layers{
		Tree:  tree,
		Dirs:  []disk.DirLayer{{Disk: l.app(), Tree: strings.TrimPrefix(appDir, "/")}, {Disk: l.home(), Tree: homeRel}},
		Cache: cacheRel,
	}
}

// lowerKey is the context key of the snapshot a sandbox being opened is
// layered on (withLower).
type lowerKey struct{}

// withLower returns ctx for an open (b.open) whose sandbox is layered on
// m's tree: storer.prepare, part of every start, reads it (lowerOf), so
// that the start path needs no parameter of its own for it.
func withLower(ctx context.Context, m snapshot.Meta) context.Context {
	return context.WithValue(ctx, lowerKey{}, m)
}

// lowerOf is the snapshot withLower set on ctx.
func lowerOf(ctx context.Context) (snapshot.Meta, bool) {
	m, ok := ctx.Value(lowerKey{}).(snapshot.Meta)
	return m, ok
}

// layerDisk layers d, the disk of the sandbox whose directory is l.dir,
// over m's tree, recording the sandbox as the tree's user first.
func (sn snapshotter) layerDisk(d *disk.Disk, m snapshot.Meta, l *layout, uid int, seed string) error {
	st := sn.snapshots()
	if err := checkTree(st.Tree(m)); err != nil {
		return err
	}
	if err := st.Use(m, filepath.Base(l.dir)); err != nil {
		return err
	}
	refreshCache(filepath.Join(st.Tree(m), cacheRel), time.Now())
	return d.Layer(diskLayout(), treeLayers(st.Tree(m)), seed, uid)
}

// checkTree fails unless every directory of tree that root resolves
// paths through (/app, HOME and the build cache's, and the directories
// between them) is, where the tree has it, a directory: the sandbox
// shapes the tree, and can move HOME/.cache (the build cache's mount
// point moves along) aside and leave a symlink to a host directory in
// its place, which root, reading the tree (refreshCache, snapshotFiles,
// CacheAddedOver) or layering a disk on it (the build cache's overlay
// and its mount point), would follow into the host's tree. The tree is
// never written once sealed: checked once, it stays so.
func checkTree(tree string) error {
	for _, rel := range []string{strings.TrimPrefix(appDir, "/"), cacheRel} {
		p := tree
		for _, part := range strings.Split(rel, "/") {
			p = filepath.Join(p, part)
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if err != nil {
				return fmt.Errorf("local backend: snapshot tree: %w", err)
			}
			if !fi.IsDir() {
				r, _ := filepath.Rel(tree, p)
				what := "not a directory"
				if fi.Mode()&fs.ModeSymlink != 0 {
					what = "a symlink, not a directory"
				}
				return fmt.Errorf("local backend: the sandbox's /%s is %s: a snapshot of it would lead root out of it", r, what)
			}
		}
	}
	return nil
}

// staleCache is how old a build cache file's mtime may be before Go's
// next use of it sets it to now (an hour, in cmd/go's cache), less a
// margin for a sandbox's first builds.
const staleCache = 45 * time.Minute

// refreshCache sets the mtime of the build cache files under dir (a
// tree's) that Go would refresh on its next use to now: in the tree,
// where it costs a system call, rather than in each sandbox layered on
// it, where even with metacopy it costs a copy-up of the file's
// metadata on the first build (bench: a fork's first build 1.6x a warm
// rebuild with a 2 h old cache without it). Only the mtime of the
// sealed tree changes, which every sandbox on it may see: the fresher,
// the longer Go leaves it alone. Errors are ignored: a file left stale
// costs a copy-up, nothing else.
func refreshCache(dir string, now time.Time) {
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > staleCache {
			_ = os.Chtimes(p, now, now) // a regular file, in a tree only root reaches
		}
		return nil
	})
}

// takeTree takes s's files (while nothing runs in it) into the tree t,
// extracting them on the host as they come.
func (sn snapshotter) takeTree(ctx context.Context, s *Sandbox, t *snapshot.Temp) error {
	x := exec.CommandContext(ctx, "tar", "-xf", "-", "-C", t.Tree(), "--no-same-owner", "--preserve-permissions",
		"--delay-directory-restore", "--no-xattrs", "--no-acls", "--no-selinux")
	x.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	var stderr bytes.Buffer
	x.Stderr = &stderr
	// A pipe of the kernel's: should tar end early, the take's writes
	// fail (EPIPE) rather than wait for a reader.
	in, err := x.StdinPipe()
	if err != nil {
		return fmt.Errorf("local backend: extract a snapshot: %w", err)
	}
	if err := x.Start(); err != nil {
		return fmt.Errorf("local backend: extract a snapshot: %w", err)
	}
	t.Sink = in
	err = sn.takeQuiet(ctx, s, t)
	in.Close()
	xerr := x.Wait()
	if err != nil {
		return err
	}
	if xerr != nil {
		return fmt.Errorf("local backend: extract the snapshot of %s: %w: %s", s.meta.ID, xerr, strings.TrimSpace(stderr.String()))
	}
	if err := checkTree(t.Tree()); err != nil {
		return fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	return nil
}

// newTemp starts what a snapshot of this backend's method is taken into.
func (sn snapshotter) newTemp() (*snapshot.Temp, error) {
	if sn.layersSnapshots() {
		return sn.snapshots().NewTreeTemp()
	}
	return sn.snapshots().NewTemp()
}

// takeInto takes s's files into t, by t's kind.
func (sn snapshotter) takeInto(ctx context.Context, s *Sandbox, t *snapshot.Temp) error {
	if t.File == nil {
		return sn.takeTree(ctx, s, t)
	}
	return sn.takeQuiet(ctx, s, t)
}

// snapshotFiles returns m's files as one tar, as put reads them: the tar
// itself, or one written from the tree (as root, following no link).
func (sn snapshotter) snapshotFiles(ctx context.Context, m snapshot.Meta) (io.ReadCloser, error) {
	st := sn.snapshots()
	if m.Method == snapshot.MethodOverlay {
		if err := checkTree(st.Tree(m)); err != nil {
			return nil, err
		}
	} else {
		f, err := os.Open(st.Files(m))
		if err != nil {
			return nil, fmt.Errorf("local backend: read snapshot: %w", err)
		}
		return f, nil
	}
	// What take writes: the build cache's files, not its directories
	// (every cache has them; restoring theirs onto the seed's would fail).
	c := exec.CommandContext(ctx, "sh", "-c", `set -e
cd "$1"
{
	find `+strings.TrimPrefix(appDir, "/")+` `+homeRel+` ! -path '`+cacheRel+`/*' -print0
	if [ -d `+cacheRel+` ]; then find `+cacheRel+` -type f -print0; fi
} | tar -cf - --sparse --null --no-recursion -T -
`, "sh", st.Tree(m))
	c.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("local backend: read snapshot: %w", err)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("local backend: read snapshot: %w", err)
	}
	return &cmdReader{ReadCloser: out, cmd: c, stderr: &stderr}, nil
}

// cmdReader is a command's output; Close waits for the command.
type cmdReader struct {
	io.ReadCloser
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func (r *cmdReader) Close() error {
	_, _ = io.Copy(io.Discard, r.ReadCloser)
	if err := r.cmd.Wait(); err != nil {
		return fmt.Errorf("local backend: read snapshot: %w: %s", err, strings.TrimSpace(r.stderr.String()))
	}
	return nil
}
