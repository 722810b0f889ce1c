package server

import (
	"archive/tar"
	"bufio"
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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// Snapshots of the sandbox's files (GET and POST wire.SnapshotPath): the
// way a backend whose sandboxes are pods (agent-sandbox) takes a
// sandbox's files out of it and puts them into another, through the
// runtime server, as one tar streamed each way. The local backend copies
// files its own way (its snapcopy.go) and does not call these.
//
// What a snapshot holds (snapAreas): the base directory and GOPATH
// whole, and of the module and build caches the files changed since this
// server started: what the sandbox added to the cache its image or
// warm-pool pod came with (a pod's seed, copied in by an init container
// before the server starts), which every sandbox of that image has
// already. Regular files, directories and symlinks, with their
// permission bits and modification times; hard links become separate
// files; sockets, FIFOs and devices are left out. Nothing is followed:
// every path is opened under an os.Root of its area, so a symlink a
// command planted (or swaps in while the tar is written) cannot lead the
// server outside the area, not even to /proc/self, which as the
// sandbox's PID 1 it could read where commands cannot.
//
// Consistency: a snapshot or a restore runs only while nothing else
// does (quiet): no command in flight on either API, no legacy upload or
// unpack in flight, and, when the server reaps orphans (PID 1 in a pod,
// or a subreaper), no child process but the process API's companion, so
// a process a command left running (`server &`) counts. The count of
// commands and writes begun is read before and after; if it moved, a
// snapshot's trailer says busy and a restore answers 409, so no half-old,
// half-new tar is ever reported whole. Writes through the sandboxd REST
// files API are not counted (neither backend writes through it).

// snapArea is one directory a snapshot holds.
type snapArea struct {
	key string // its entries' first name element (wire.SnapshotArea*)
	dir string // absolute
	// cache: taken are only the files changed since the server started;
	// a restore keeps what is there and adds the snapshot's (a cache is
	// content-addressed: an extra entry changes no result).
	cache bool
}

// snapAreas returns the sandbox's snapshot areas: the base directory,
// GOPATH's first entry, GOMODCACHE and GOCACHE from the commands'
// environment, a directory named twice kept once (the first name).
func (s *Server) snapAreas() []snapArea {
	env := envMap(s.env)
	gopath, _, _ := strings.Cut(env["GOPATH"], string(os.PathListSeparator))
	all := []snapArea{
		{key: wire.SnapshotAreaApp, dir: s.cfg.BaseDir},
		{key: wire.SnapshotAreaGoPath, dir: gopath},
		{key: wire.SnapshotAreaGoModCache, dir: env["GOMODCACHE"], cache: true},
		{key: wire.SnapshotAreaGoCache, dir: env["GOCACHE"], cache: true},
	}
	var out []snapArea
	for _, a := range all {
		if a.dir == "" || !filepath.IsAbs(a.dir) {
			continue
		}
		a.dir = filepath.Clean(a.dir)
		if slices.ContainsFunc(out, func(o snapArea) bool { return o.dir == a.dir }) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// nestedIn returns the paths, relative to a, of the other areas' dirs
// inside a: a walk or an emptying of a leaves them to their own area.
func nestedIn(a snapArea, areas []snapArea) []string {
	var out []string
	for _, o := range areas {
		if o.dir == a.dir {
			continue
		}
		if rel, err := filepath.Rel(a.dir, o.dir); err == nil && rel != "." && filepath.IsLocal(rel) {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// changes counts what alters a sandbox's files: commands (either API)
// and legacy uploads and unpacks, begun ever and in flight now.
type changes struct {
	mu       sync.Mutex
	begun    int64
	inFlight int
}

// begin counts one change in flight; the func it returns ends it.
func (c *changes) begin() func() {
	c.mu.Lock()
	c.begun++
	c.inFlight++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.inFlight--
			c.mu.Unlock()
		})
	}
}

func (c *changes) state() (begun int64, inFlight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.begun, c.inFlight
}

// errBusy is wrapped by the reasons a snapshot or a restore is refused.
var errBusy = errors.New("busy")

// snapDrain is how long a snapshot or a restore waits for the changes
// in flight to end before it refuses: a command's end is counted a moment
// after its last answer went out (the process API's bookkeeping), so a
// client that snapshots right after a command returned is not refused
// for it; one still running is, after the wait.
const snapDrain = 2 * time.Second

// quiet returns how many changes ever began when nothing runs in the
// sandbox, or an error wrapping errBusy naming what does.
func (s *Server) quiet() (int64, error) {
	begun, inFlight := s.chg.state()
	for deadline := time.Now().Add(s.snapDrain); inFlight > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		begun, inFlight = s.chg.state()
	}
	if inFlight > 0 {
		return 0, fmt.Errorf("%w: %d commands or file writes are in flight in the sandbox; its files are taken or replaced only while nothing runs: wait for them to end", errBusy, inFlight)
	}
	if s.reap != nil {
		others, err := s.otherProcesses()
		if err != nil {
			return 0, fmt.Errorf("list the sandbox's processes: %w", err)
		}
		if len(others) > 0 {
			return 0, fmt.Errorf("%w: %d processes besides the runtime server run in the sandbox (what a command left running, e.g. started with &); "+
				"its files are taken or replaced only while nothing runs: end them first", errBusy, len(others))
		}
	}
	return begun, nil
}

// stillQuiet fails, wrapping errBusy, when something ran since quiet
// returned before.
func (s *Server) stillQuiet(before int64) error {
	after, err := s.quiet()
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%w: a command ran or a file was written meanwhile, so the files may be half old, half new: try again once nothing runs", errBusy)
	}
	return nil
}

// otherProcesses lists this process's children but the process API's
// companion and zombies waiting to be reaped: as the reaper, every
// process a command started and left behind ends up among them.
func (s *Server) otherProcesses() ([]int, error) {
	pids, err := children()
	if err != nil {
		return nil, err
	}
	companion := int(s.companion.Load())
	var out []int
	for _, pid := range pids {
		if pid == companion || zombie(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone already
	}
	st := string(data)
	end := strings.LastIndexByte(st, ')')
	if end < 0 || end+2 >= len(st) {
		return false
	}
	return st[end+2] == 'Z'
}

// cacheEpoch is the change time, on the file system of dir, of a file
// made now: files of a cache whose change time is not before it were
// written (or had their times or modes changed) since. Read from the
// file system, not the clock, since the kernel stamps files with a
// coarser clock than time.Now reads. Zero when no file can be made.
func cacheEpoch(dir string) time.Time {
	if dir == "" {
		return time.Time{}
	}
	f, err := os.CreateTemp(dir, ".sandbox-server-epoch-*")
	if err != nil {
		return time.Time{}
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}
	}
	return ctime(fi)
}

func ctime(fi fs.FileInfo) time.Time {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.ModTime()
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}

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
// the directories on their way. Directories a command made unwritable or
// unsearchable get their owner's bits back first (the server runs as
// their owner).
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

func emptyDir(root *os.Root, dir string, keep []string) error {
	if err := ownerBits(root, dir); err != nil {
		return err
	}
	f, err := root.Open(dir)
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if slices.Contains(keep, p) {
			continue
		}
		if e.IsDir() && slices.ContainsFunc(keep, func(k string) bool { return strings.HasPrefix(k, p+"/") }) {
			if err := emptyDir(root, p, keep); err != nil {
				return err
			}
			continue
		}
		if err := removeTree(root, p); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes p and what is under it; directories it cannot
// empty for their modes get their owner's bits back, then it tries
// again.
func removeTree(root *os.Root, p string) error {
	if err := root.RemoveAll(p); err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	var fix func(p string) error
	fix = func(p string) error {
		fi, err := root.Lstat(p)
		if err != nil || !fi.IsDir() {
			return nil
		}
		if err := ownerBits(root, p); err != nil {
			return err
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				if err := fix(path.Join(p, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := fix(p); err != nil {
		return err
	}
	return root.RemoveAll(p)
}

// ownerBits gives directory p its owner's read, write and search bits.
func ownerBits(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o700 == 0o700 {
		return nil
	}
	return root.Chmod(p, fi.Mode().Perm()|0o700)
}
