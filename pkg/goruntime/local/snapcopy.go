package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/nslimits"
)

// How a snapshot's files leave a sandbox and enter another (the copy
// method). Both run tar as the sandbox's own processes run: in its user
// and mount namespaces, as its uid and gid there
// (nslimits.SandboxCommand), on the tree it sees (/app, HOME). So the
// copy can read and write exactly what the sandbox itself can: a
// symlink a command planted leads where the sandbox's own view leads,
// never into the host's tree, even if the sandbox's runtime server was
// taken over and swaps paths while tar runs.
//
//   - taking: /app, HOME but the build cache (its mount point is another
//     file system), and the build cache's files the sandbox added to the
//     seed, not the seed (every sandbox of the host has it; take says
//     how they are told apart). Directories of
//     the cache are not taken (every cache has the same ones), nor
//     overlayfs's whiteouts (a seed entry the sandbox deleted comes
//     back: the cache is content-addressed, an extra entry changes no
//     result). Modes, mtimes, symlinks and hard links are kept; tar
//     never follows a symlink.
//   - putting: the same, the other way; the cache's files go through
//     its overlay. Restoring first empties /app and HOME (but the build
//     cache, which keeps its entries and gains the snapshot's).

var takeScript = `set -e
cd /
{
	find app ` + homeRel + ` -xdev ! -path '` + cacheRel + `/*' -print0
	if [ "$1" = listed ]; then cat; elif [ -d ` + cacheRel + ` ]; then find ` + cacheRel + ` -type f -user "$(id -u)" -print0; fi
} | tar -cf - --sparse --null --no-recursion -T -
`

var putScript = `set -e
cd /
if [ "$1" = restore ]; then
	find app -mindepth 1 -delete
	find ` + homeRel + ` -xdev -mindepth 1 ! -path ` + homeRel + `/.cache ! -path ` + cacheRel + ` ! -path '` + cacheRel + `/*' -delete
fi
tar -xpf - --no-same-owner --delay-directory-restore
`

// homeRel and cacheRel are HOME and GOCACHE as the sandbox sees them
// (bwrap.go), relative to its root.
var (
	homeRel  = strings.TrimPrefix(homeDir, "/")
	cacheRel = homeRel + "/.cache/go-build"
)

// take writes s's files, as one tar, to w. Which files of the build
// cache are the sandbox's own is read from the host, in the overlay's
// upper directory (names only: disk.CacheAdded), when s has a disk and
// this process can read it: telling them apart in the sandbox's view
// means a stat of every seed entry (10x the time of the copy here).
// Otherwise tar's shell finds the files its uid owns.
func (s *Sandbox) take(ctx context.Context, w io.Writer) error {
	if s.meta.Disk == nil {
		return s.asSandbox(ctx, nil, w, takeScript)
	}
	d := s.meta.Disk.Through(s.l.view)
	added, ok, err := d.CacheAdded()
	if d.Lower != "" { // layered (snapcow.go): the tree's entries too
		added, ok, err = d.CacheAddedOver(filepath.Join(d.Lower, cacheRel))
	}
	if err != nil || !ok {
		// Not readable from here (a user's sandbox whose disk only its
		// own ids reach): the sandbox's shell finds them.
		s.b.opts.Logger.DebugContext(ctx, "local sandbox snapshot: cache additions found in the sandbox", "id", s.meta.ID, "err", err)
		return s.asSandbox(ctx, nil, w, takeScript)
	}
	var list bytes.Buffer
	for _, f := range added {
		list.WriteString(cacheRel + "/" + f + "\x00")
	}
	return s.asSandbox(ctx, &list, w, takeScript, "listed")
}

// put writes the files of the tar r into s; restore empties it first.
func (s *Sandbox) put(ctx context.Context, r io.Reader, restore bool) error {
	mode := "add"
	if restore {
		mode = "restore"
	}
	return s.asSandbox(ctx, r, io.Discard, putScript, mode)
}

// asSandbox runs the shell script in s as its processes run, with args.
func (s *Sandbox) asSandbox(ctx context.Context, stdin io.Reader, stdout io.Writer, script string, args ...string) error {
	if s.meta.Server <= 0 {
		return fmt.Errorf("local sandbox %s predates snapshots (its runtime server's pid is not recorded): open a new one", s.meta.ID)
	}
	cmd, done, err := nslimits.SandboxCommand(ctx, s.meta.Server, s.holds, append([]string{"sh", "-c", script, "sh"}, args...)...)
	if err != nil {
		return fmt.Errorf("local sandbox %s: %w", s.meta.ID, err)
	}
	defer done()
	var stderr bytes.Buffer
	out := &recordingWriter{w: stdout}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, &stderr
	if err := cmd.Run(); err != nil {
		if out.err != nil { // what broke tar's pipe (the quota)
			return fmt.Errorf("local sandbox %s: %w", s.meta.ID, out.err)
		}
		return fmt.Errorf("local sandbox %s: copy files as the sandbox: %w: %s", s.meta.ID, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// holds fails unless pid is one of s's processes (in its cgroup).
func (s *Sandbox) holds(pid int) error {
	pids, err := s.meta.Cgroup.Procs()
	if err != nil {
		return fmt.Errorf("list the sandbox's processes: %w", err)
	}
	if !slices.Contains(pids, pid) {
		return fmt.Errorf("not a process of the sandbox (its runtime server ended): open a new sandbox")
	}
	return nil
}

// recordingWriter keeps the first error its writer returned.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// activity is what says that something ran in a sandbox: the processes
// other than its runtime server, and the server's counts of commands
// started and request bytes received (a file written).
type activity struct {
	others []int
	counts string
}

// quiet reports what runs in s, failing with an error wrapping
// goruntime.ErrSandboxBusy when anything but the runtime server (and its
// process API companion) does.
func (s *Sandbox) quiet(ctx context.Context, what string) (activity, error) {
	var a activity
	pids, err := s.meta.Cgroup.Procs()
	if err != nil {
		return a, fmt.Errorf("local sandbox %s: %s: %w", s.meta.ID, what, err)
	}
	for _, p := range pids {
		if !s.keep[p] && !s.companion(p) {
			a.others = append(a.others, p)
		}
	}
	if len(a.others) > 0 {
		return a, fmt.Errorf("local sandbox %s: %s: %d processes besides the runtime server run in it (a command, or what a command left behind); "+
			"its files are taken only while nothing runs: wait for the command to end, or end what it left: %w",
			s.meta.ID, what, len(a.others), goruntime.ErrSandboxBusy)
	}
	if a.counts, err = s.serverCounts(ctx); err != nil {
		return a, fmt.Errorf("local sandbox %s: %s: %w", s.meta.ID, what, err)
	}
	return a, nil
}

// stillQuiet fails, wrapping goruntime.ErrSandboxBusy, when something ran
// in s since before was taken.
func (s *Sandbox) stillQuiet(ctx context.Context, before activity, what string) error {
	after, err := s.quiet(ctx, what)
	if err != nil {
		return err
	}
	if after.counts != before.counts {
		return fmt.Errorf("local sandbox %s: %s: a command ran or a file was written meanwhile, so the copy may be half old, half new: "+
			"try again once nothing runs: %w", s.meta.ID, what, goruntime.ErrSandboxBusy)
	}
	return nil
}

// companion reports whether pid is the runtime server's process API
// companion (a child of the server by that name). A sandbox process can
// take the name; it then only hides itself from its own sandbox's
// snapshot, which the counts still catch when it was started as a command.
func (s *Sandbox) companion(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st := string(data)
	open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
	if open < 0 || end < open {
		return false
	}
	comm := st[open+1 : end]
	f := strings.Fields(st[end+1:])
	if len(f) < 2 {
		return false
	}
	ppid, _ := strconv.Atoi(f[1])
	name := server.ProcessAPIName
	if len(name) > 15 { // the kernel keeps 15 bytes of a command's name
		name = name[:15]
	}
	return ppid == s.meta.Server && s.meta.Server > 0 && comm == name
}

// serverCounts returns the runtime server's counters of commands and of
// bytes received, as one string to compare.
func (s *Sandbox) serverCounts(ctx context.Context) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialSandboxSocket(ctx, s.l.socket(), serverUID(s.meta.HostUID))
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("read the runtime server's counters: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("read the runtime server's counters: %s", resp.Status)
	}
	var b strings.Builder
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sandbox_server_commands_total{") || strings.HasPrefix(line, "sandbox_server_commands_in_flight{") ||
			strings.HasPrefix(line, "sandbox_server_bytes_total{") && strings.Contains(line, `direction="in"`) {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String(), sc.Err()
}
