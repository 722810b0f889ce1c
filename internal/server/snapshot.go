package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
