package cgroups

// A stand-in for the user's systemd on a private D-Bus: the one method
// JoinSystemdScope calls (org.freedesktop.systemd1.Manager's
// StartTransientUnit), done as systemd does it for a scope on the real
// kernel's cgroup2 mount, and the JobRemoved signal that ends the job.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
)

const (
	systemdName  = "org.freedesktop.systemd1"
	systemdPath  = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIface = "org.freedesktop.systemd1.Manager"
)

// unitProperty is one (sv) of StartTransientUnit's properties.
type unitProperty struct {
	Name  string
	Value dbus.Variant
}

// auxUnit is one (sa(sv)) of StartTransientUnit's auxiliary units.
type auxUnit struct {
	Name  string
	Props []unitProperty
}

// startCall is what one StartTransientUnit call asked for.
type startCall struct {
	Name, Mode string
	Props      map[string]any
}

// fakeSystemd serves StartTransientUnit for scopes: it makes the scope's
// cgroup in parent, gives it to owner when Delegate=yes was asked for
// (the directory and the files a delegatee writes: cgroup.procs,
// cgroup.subtree_control, cgroup.threads, as the system manager's
// Delegate= does for a unit's user), moves the PIDs into it and ends the
// job with JobRemoved. It records every call. (A real user manager runs
// as the user, so its cgroups are the user's either way; there
// Delegate=yes is what enables the controllers for the scope and keeps
// systemd out of its subtree. The recorded Delegate is what the tests
// hold to.)
type fakeSystemd struct {
	conn   *dbus.Conn
	parent string // the cgroup the scopes are made in
	owner  int    // the uid a delegated scope is given to

	mu     sync.Mutex
	result string // the job's result; "" means "done"
	noMove bool   // report the job done without moving the PIDs
	calls  []startCall
	jobs   uint32
}

func (f *fakeSystemd) startTransientUnit(name, mode string, props []unitProperty, aux []auxUnit) (dbus.ObjectPath, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := startCall{Name: name, Mode: mode, Props: map[string]any{}}
	for _, p := range props {
		call.Props[p.Name] = p.Value.Value()
	}
	f.calls = append(f.calls, call)
	fail := func(format string, args ...any) (dbus.ObjectPath, *dbus.Error) {
		return "", dbus.MakeFailedError(fmt.Errorf(format, args...))
	}
	if !strings.HasSuffix(name, ".scope") || len(aux) != 0 {
		return fail("fake systemd makes scopes only, without auxiliary units: %q", name)
	}
	pids, ok := call.Props["PIDs"].([]uint32)
	if !ok || len(pids) == 0 {
		return fail("a scope needs PIDs (au), got %#v", call.Props["PIDs"])
	}
	f.jobs++
	job := dbus.ObjectPath(fmt.Sprintf("%s/job/%d", systemdPath, f.jobs))
	result := f.result
	if result == "" {
		result = "done"
		dir := filepath.Join(f.parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail("make the scope's cgroup: %v", err)
		}
		if delegate, _ := call.Props["Delegate"].(bool); delegate {
			for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control"), filepath.Join(dir, "cgroup.threads")} {
				if err := os.Chown(p, f.owner, f.owner); err != nil {
					return fail("delegate %s: %v", p, err)
				}
			}
		}
		for _, pid := range pids {
			if f.noMove {
				break
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(int(pid))), 0o644); err != nil {
				return fail("move PID %d into %s: %v", pid, dir, err)
			}
		}
	}
	// The job ends apart from the reply, as systemd's do (go-systemd
	// listens for the job's end before it sends the call, so the signal
	// may even arrive first).
	id := f.jobs
	go func() { _ = f.conn.Emit(systemdPath, managerIface+".JobRemoved", id, job, name, result) }()
	return job, nil
}

// recorded returns the calls so far.
func (f *fakeSystemd) recorded() []startCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]startCall(nil), f.calls...)
}

// set makes the next jobs end with result (without touching cgroups) or,
// with result "", done; noMove leaves the PIDs where they are.
func (f *fakeSystemd) set(result string, noMove bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.result, f.noMove = result, noMove
}

// privateBus starts a dbus-daemon listening on dir/bus that root and uid
// alone may connect to, and returns its address; the daemon is killed
// when the test ends. dbus-daemon lets in only users it can look up (it
// reads their groups), and uid has no account: the daemon runs in a
// mount namespace of its own where /etc/passwd and /etc/group are copies
// with an entry for uid added.
func privateBus(t *testing.T, dir string, uid int) string {
	t.Helper()
	for _, tool := range []string{"dbus-daemon", "unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
	const name = "go-runtime-sandbox-test"
	for _, f := range []struct{ path, entry string }{
		{"/etc/passwd", fmt.Sprintf("%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", name, uid, uid)},
		{"/etc/group", fmt.Sprintf("%s:x:%d:\n", name, uid)},
	} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.path)), append(data, f.entry...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "bus")
	conf := fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow user="%s"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>
`, sock, name)
	confPath := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/group" /etc/group && exec dbus-daemon --config-file="$1/bus.conf" --nofork --nopidfile --nosyslog --print-address=1`,
		"sh", dir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // unshare and sh exec: this is the daemon
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v; stderr: %s", err, stderr.String())
	}
	// The daemon's umask may leave others without write access to the
	// socket, which connect needs.
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// serveFakeSystemd connects to the bus at addr as org.freedesktop.systemd1
// and serves f's StartTransientUnit until the test ends.
func serveFakeSystemd(t *testing.T, addr string, f *fakeSystemd) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connect to the private bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	f.conn = conn
	if err := conn.ExportMethodTable(map[string]any{"StartTransientUnit": f.startTransientUnit}, systemdPath, managerIface); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(systemdName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s on the private bus: %v (reply %v)", systemdName, err, reply)
	}
}
