package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestMain makes this test binary a gate when Command starts it as one,
// as the runtime server's binary is the backend's.
func TestMain(m *testing.M) {
	if Requested(os.Getenv) {
		os.Exit(Main(os.Args[1:], os.Environ(), os.Stderr))
	}
	os.Exit(m.Run())
}

// startGate starts this test binary as a gate for p (no namespaces) with
// its release pipe at fd 3, and returns it with the pipe's write end and
// its combined output.
func startGate(t *testing.T, p Plan) (*exec.Cmd, *os.File, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.WaitFD = 3
	cmd, err := Command(exe, p, nil, []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close(); _ = cmd.Process.Kill() })
	return cmd, w, &out
}

// runGate starts a gate for p, releases it and returns what its command
// printed.
func runGate(t *testing.T, p Plan) string {
	t.Helper()
	cmd, w, out := startGate(t, p)
	if _, err := w.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gate: %v: %s", err, out)
	}
	return out.String()
}

// TestRlimits: the plan's rlimits reach the command soft and hard alike,
// also where the Go runtime raised the soft open-file limit it started
// with (lower here) and would put it back when it execs, had another
// process set the limit; and the gate's marker does not reach the
// command.
func TestRlimits(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 200 {
		t.Skipf("hard open-file limit %d: too low to test", orig.Max)
	}
	// The gate starts with a soft limit of 64, which its runtime raises
	// and remembers.
	low := syscall.Rlimit{Cur: 64, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	got := runGate(t, Plan{
		Rlimits: []Rlimit{{Resource: syscall.RLIMIT_NOFILE, Name: "open-file", Value: 100}, {Resource: syscall.RLIMIT_FSIZE, Name: "file size", Value: 1 << 20}},
		Command: []string{"/bin/sh", "-c", `ulimit -Sn; ulimit -Hn; ulimit -Sf; ulimit -Hf; echo "${` + Env + `-unset}"`},
	})
	if want := "100\n100\n2048\n2048\nunset\n"; got != want {
		t.Errorf("the command's limits and marker:\n%s\nwant\n%s", got, want)
	}
}

// TestPassesOnlyThePlans: the command gets the descriptors the plan
// passes and none of the others the gate inherited: not its release, not
// one its starter handed it, not one the starter itself inherited
// without close-on-exec (as a launcher's reach mcp-server).
func TestPassesOnlyThePlans(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	release, released, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer released.Close()
	passed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer passed.Close()
	stray, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	// Inherited by this process without the flag, as from a launcher.
	leaked, err := syscall.Dup(int(stray.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	cmd, err := Command(exe, Plan{WaitFD: 3, Pass: []int{4}, Command: []string{"/bin/sh", "-c", `ls /proc/$$/fd`}}, nil, []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{release, passed, stray}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release.Close()
	if _, err := released.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gate: %v: %s", err, &out)
	}
	// (No pipeline: the shell would hold its pipe while ls lists.)
	if got, want := strings.Join(strings.Fields(out.String()), " "), "0 1 2 4"; got != want {
		t.Errorf("the command's descriptors: %q, want %q (the plan passes 4; 3 was the release, 5 and %d were the starter's)", got, want, leaked)
	}
}

// TestReleaseLost: a gate whose release pipe closes unwritten (the
// backend gave up) exits 97 without running its command.
func TestReleaseLost(t *testing.T) {
	marker := t.TempDir() + "/ran"
	cmd, w, out := startGate(t, Plan{Command: []string{"/bin/sh", "-c", "touch " + marker}})
	w.Close()
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitReleaseLost {
		t.Fatalf("gate without a release: %v, want exit status %d: %s", err, ExitReleaseLost, out)
	}
	if !strings.Contains(out.String(), "released by nobody") {
		t.Errorf("gate without a release said %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without a release")
	}
}

// TestTakeIDs: as root, a gate with ids takes them as real, effective and
// saved ids with no supplementary groups and no capability left.
func TestTakeIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change ids")
	}
	got := runGate(t, Plan{UID: 65534, GID: 65534, Command: []string{"/bin/sh", "-c",
		`grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb):' /proc/self/status | tr -s '\t ' ' '`}})
	want := "Uid: 65534 65534 65534 65534\nGid: 65534 65534 65534 65534\nGroups: \n" +
		"CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapAmb: 0000000000000000\n"
	if got != want {
		t.Errorf("the command's ids and capabilities:\n%s\nwant\n%s", got, want)
	}
}

// TestUserNamespace: a gate with a memory disk runs in a user and mount
// namespace of its own, the caller mapped to its root, and its command
// sees the disk laid out with the overlay showing the lower directory's
// files; the host's mount point stays empty.
func TestUserNamespace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lower, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(lower+"/seeded", []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := &UserNS{UID: os.Getuid(), GID: os.Getgid()}
	p := Plan{
		Disk: &Disk{Dir: dir, Options: "size=1m,nr_inodes=100", Mode: 0o700, Dirs: []string{"up", "work", "cache"},
			Overlay: Overlay{Lower: lower, Upper: "up", Work: "work", Target: "cache"}, Files: []File{{Name: "cache/stamp", Data: "1\n"}}},
		Command: []string{"/bin/sh", "-c", "cat /proc/self/uid_map; id -u; cat " + dir + "/cache/seeded " + dir + "/cache/stamp; stat -c %a " + dir + "/up"},
	}
	cmd, err := Command(exe, p, ns, []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Map(context.Background(), 0, ns); err != nil {
		t.Fatalf("Map without subordinate ids: %v, want nothing to do", err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gate in a user namespace: %v: %s", err, out)
	}
	want := fmt.Sprintf("0 %d 1 0 seed 1 700", os.Getuid())
	if got := strings.Join(strings.Fields(string(out)), " "); got != want {
		t.Errorf("in the gate's namespaces: %q, want %q", got, want)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("the host's mount point holds %v (%v), want nothing", ents, err)
	}
}

// TestPlanRefused: a plan the gate could not carry out as meant is
// refused before anything starts.
func TestPlanRefused(t *testing.T) {
	disk := func(f func(*Disk)) *Disk {
		d := &Disk{Dir: "/d", Overlay: Overlay{Lower: "/l", Upper: "u", Work: "w", Target: "c"}}
		f(d)
		return d
	}
	for name, p := range map[string]Plan{
		"relative command":    {Command: []string{"bwrap"}},
		"no command":          {},
		"uid without gid":     {UID: 5, Command: []string{"/bin/true"}},
		"relative disk":       {Disk: disk(func(d *Disk) { d.Dir = "d" }), Command: []string{"/bin/true"}},
		"dir leaves the disk": {Disk: disk(func(d *Disk) { d.Dirs = []string{"../x"} }), Command: []string{"/bin/true"}},
		"file off the disk":   {Disk: disk(func(d *Disk) { d.Files = []File{{Name: "/etc/x"}} }), Command: []string{"/bin/true"}},
		"relative bind":       {Disk: disk(func(d *Disk) { d.Binds = []Bind{{Src: "x", Name: "x"}} }), Command: []string{"/bin/true"}},
		"pass stdout":         {Pass: []int{1}, Command: []string{"/bin/true"}},
		"pass the release":    {WaitFD: 3, Pass: []int{3}, Command: []string{"/bin/true"}},
	} {
		if _, err := p.Args(); err == nil {
			t.Errorf("%s: Args() accepted %+v", name, p)
		}
		b, _ := json.Marshal(p)
		var stderr bytes.Buffer
		if code := Main([]string{"--plan", string(b)}, nil, &stderr); code != ExitUsage {
			t.Errorf("%s: Main = %d, want %d: %s", name, code, ExitUsage, &stderr)
		}
	}
	var stderr bytes.Buffer
	if code := Main(nil, nil, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), "local backend") {
		t.Errorf("Main without a plan = %d, %q; want %d naming the local backend", code, &stderr, ExitUsage)
	}
}

// TestJoin: a gate with Join moves into each cgroup before its command
// runs, so the command starts in it; a Join it cannot write ends the
// gate before the command runs. Root on a cgroup v1 host (the pids
// hierarchy).
func TestJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(root + "/tasks"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	dir, err := os.MkdirTemp(root, "gate-join-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	out := runGate(t, Plan{Join: []string{dir + "/tasks"}, Command: []string{"/bin/cat", "/proc/self/cgroup"}})
	want := ":pids:/" + strings.TrimPrefix(dir, root+"/")
	if !strings.Contains(out, want+"\n") {
		t.Fatalf("the command's cgroups:\n%s\nwant a line ending %q", out, want)
	}

	cmd, w, log := startGate(t, Plan{Join: []string{dir + "-gone/tasks"}, Command: []string{"/bin/echo", "ran"}})
	if _, err := w.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != ExitFailed || strings.Contains(log.String(), "ran") {
		t.Fatalf("a gate whose cgroup is missing: %v, output %q; want exit %d before the command", err, log, ExitFailed)
	}
	if !strings.Contains(log.String(), Prefix+"join the sandbox's cgroup") {
		t.Fatalf("output %q does not say the join failed", log)
	}
}
