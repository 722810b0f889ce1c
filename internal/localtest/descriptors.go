package localtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Descriptors a launcher leaves open without close-on-exec in the program
// it starts, as MCP clients, IDEs and shells do: a sandbox must start with
// exactly the descriptors the backend hands it, whatever its starter
// holds (docs/local-backend.md, "Descriptors").

// FirstInherited is the descriptor the first of Inherit's objects gets in
// the started program; the others follow it.
const FirstInherited = 7

// Inherited maps the identity ("dev:ino") of each object Inherit made to
// what it is.
type Inherited map[string]string

// Inherit makes the objects a careless launcher leaves to what it
// starts: a directory, a file open for appending (mode 0600), a pipe and
// a socket. It returns them as an exec.Cmd's ExtraFiles, placed at
// FirstInherited and on (the descriptors before them are closed), and
// their identities; the test's cleanup closes them.
func Inherit(tb testing.TB) ([]*os.File, Inherited) {
	tb.Helper()
	dir := tb.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "owned-by-the-launcher"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	s0, s1 := os.NewFile(uintptr(pair[0]), "socket"), os.NewFile(uintptr(pair[1]), "socket peer")
	objs := []*os.File{d, f, r, s0}
	tb.Cleanup(func() {
		for _, o := range append(objs, w, s1) {
			o.Close()
		}
	})
	in := Inherited{}
	for i, what := range []string{"the launcher's directory " + dir, "the launcher's file " + f.Name(), "the launcher's pipe", "the launcher's socket"} {
		id, err := identity(int(objs[i].Fd()))
		if err != nil {
			tb.Fatal(err)
		}
		in[id] = what
	}
	return append(make([]*os.File, FirstInherited-3), objs...), in
}

// InheritedHere identifies the objects at FirstInherited and on in this
// process: a program started with Inherit's files.
func InheritedHere() (Inherited, error) {
	in := Inherited{}
	for i, what := range []string{"the launcher's directory", "the launcher's file", "the launcher's pipe", "the launcher's socket"} {
		id, err := identity(FirstInherited + i)
		if err != nil {
			return nil, fmt.Errorf("inherited descriptor %d: %w", FirstInherited+i, err)
		}
		in[id] = what
	}
	return in, nil
}

// ListCommand is a shell command that prints each descriptor of the
// shell running it as "/proc/PID/fd/N DEV:INO", for CheckCommand. (The
// shell lists its own, with nothing open of its own while stat runs but
// for the directory its glob read, closed by then: stat says it is gone,
// on standard output too, and the command succeeds.)
const ListCommand = `stat -L -c '%n %d:%i' /proc/$$/fd/* 2>&1 || true`

// CheckCommand reads ListCommand's output and returns what is wrong with
// it: a descriptor that is one of in's objects, or any descriptor but the
// standard streams.
func (in Inherited) CheckCommand(out string) []string {
	var bad []string
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "stat: ") && strings.HasSuffix(line, ": No such file or directory") {
			continue // the glob's directory
		}
		name, id, ok := strings.Cut(line, " ")
		fd, err := strconv.Atoi(filepath.Base(name))
		if !ok || err != nil {
			bad = append(bad, fmt.Sprintf("unexpected line %q", line))
			continue
		}
		seen++
		switch what, found := in[id]; {
		case found:
			bad = append(bad, fmt.Sprintf("fd %d is %s", fd, what))
		case fd > 2:
			bad = append(bad, fmt.Sprintf("fd %d (%s) is not a standard stream", fd, id))
		}
	}
	if seen == 0 {
		bad = append(bad, fmt.Sprintf("no descriptor listed: %q", out))
	}
	return bad
}

// NotVisible reports whether err, from CheckProcess, says that the
// process runs as a uid whose descriptors this process, not root, may not
// list: a user's sandbox under its subordinate ids. Root checks those; a
// test run as the user can only log them (the commands inside list
// theirs).
func NotVisible(err error) bool { return errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 }

// CheckProcess returns the descriptors of process pid that are one of
// in's objects.
func (in Inherited) CheckProcess(pid int) ([]string, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the descriptors of process %d: %w", pid, err)
	}
	var bad []string
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &st) != nil {
			continue // closed since
		}
		if what, found := in[fmt.Sprintf("%d:%d", st.Dev, st.Ino)]; found {
			bad = append(bad, fmt.Sprintf("process %d holds %s as fd %s", pid, what, e.Name()))
		}
	}
	return bad, nil
}

// identity is the "dev:ino" of what descriptor fd is open on.
func identity(fd int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// SandboxProcesses lists the host pids of the running local sandbox whose
// directory is dir (local.Sandbox.Dir): those its record keeps
// (bubblewrap, the runtime server) and every other process in the
// server's pid namespace (its process API companion, commands).
func SandboxProcesses(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "sandbox.json"))
	if err != nil {
		return nil, err
	}
	var m struct {
		Keep   []int `json:"keep"`
		Server int   `json:"server_pid"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Server <= 0 || len(m.Keep) == 0 {
		return nil, fmt.Errorf("sandbox.json %s: server pid %d, %v", data, m.Server, err)
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(m.Server) + "/ns/pid")
	if err != nil {
		return nil, fmt.Errorf("the server's pid namespace: %w", err)
	}
	pids := m.Keep
	all, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range all {
		pid, _ := strconv.Atoi(filepath.Base(p))
		if l, err := os.Readlink(p + "/ns/pid"); err == nil && l == ns && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
