package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// scopeHelperEnv makes the test binary act as a user's process asking its
// systemd for a scope (scopeHelper); its value is what to do.
const scopeHelperEnv = "CGROUPS_TEST_SCOPE_HELPER"

// TestJoinSystemdScope: a user's process in a cgroup v2 it cannot write
// (root's, as a login session's scope is) asks its systemd for a
// delegated scope, ends up in the scope's cgroup, and can then enable a
// controller for the scope's children (its process moving to a leaf).
// The user is uid 65532 running a copy of this binary; systemd is
// fakeSystemd on a private dbus-daemon, making the scope on the real
// kernel's cgroup2 mount (here the hybrid /sys/fs/cgroup/unified, with
// hugetlb: memory and pids are on v1 on these machines). No real user
// systemd runs here. The bus is found both ways a user's process finds
// it: DBUS_SESSION_BUS_ADDRESS, and $XDG_RUNTIME_DIR/bus.
func TestJoinSystemdScope(t *testing.T) {
	r := newScopeRig(t, true)
	for _, tc := range []struct{ name, env string }{
		{"DBUS_SESSION_BUS_ADDRESS", "DBUS_SESSION_BUS_ADDRESS=" + r.addr},
		{"XDG_RUNTIME_DIR", "XDG_RUNTIME_DIR=" + r.busDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(r.fake.recorded())
			out, pid, err := r.runHelper(t, "join", tc.env)
			if err != nil {
				t.Errorf("helper: %v", err) // and what did systemd get asked for?
			}
			calls := r.fake.recorded()[before:]
			if len(calls) != 1 {
				t.Fatalf("systemd got %d StartTransientUnit calls, want 1: %+v", len(calls), calls)
			}
			c := calls[0]
			t.Logf("StartTransientUnit(%q, %q, %v)", c.Name, c.Mode, c.Props)
			if want := regexp.MustCompile(fmt.Sprintf(`^go-runtime-sandbox-%d-[0-9a-f]{8}\.scope$`, pid)); !want.MatchString(c.Name) {
				t.Errorf("unit name %q, want go-runtime-sandbox-%d-<random>.scope", c.Name, pid)
			}
			if d, ok := c.Props["Delegate"].(bool); !ok || !d {
				t.Errorf("Delegate = %#v, want true", c.Props["Delegate"])
			}
			if p, _ := c.Props["PIDs"].([]uint32); !slices.Equal(p, []uint32{uint32(pid)}) {
				t.Errorf("PIDs = %#v, want [%d] (the helper's)", c.Props["PIDs"], pid)
			}
			if d, _ := c.Props["Description"].(string); d == "" {
				t.Error("no Description")
			}
			scope := "/" + filepath.Base(r.top) + "/" + c.Name
			wants := []string{
				"scope: " + c.Name + " made=true",
				"own cgroup: " + scope + "\n",
				"enabled: ok",
				"own cgroup after enabling: " + scope + "/" + hostLeaf + "\n",
				"child has hugetlb files: true",
				"again: " + c.Name + " made=false",
			}
			if mounts, _, _ := mountedControllers(); mounts["memory"] != "" && mounts["pids"] != "" {
				wants = append(wants, "on this host's v1 memory and pids: <nil> <nil>")
			}
			for _, want := range wants {
				if !strings.Contains(out, want) {
					t.Errorf("helper did not report %q", want)
				}
			}
		})
	}
}

// TestJoinSystemdScopeJobErrors: a job that fails, and one that reports
// done with the process elsewhere, are errors naming the unit.
func TestJoinSystemdScopeJobErrors(t *testing.T) {
	r := newScopeRig(t, true)
	for _, tc := range []struct {
		name, result string
		noMove       bool
		want         string
	}{
		{"failed", "failed", false, `ended "failed", not "done"`},
		{"not moved", "", true, "but this process is still in cgroup " + r.session},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.fake.set(tc.result, tc.noMove)
			out, _, err := r.runHelper(t, "error", "DBUS_SESSION_BUS_ADDRESS="+r.addr)
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			for _, want := range []string{tc.want, "go-runtime-sandbox-", "own cgroup: /" + filepath.Base(r.top) + "/session.scope\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("helper did not report %q", want)
				}
			}
		})
	}
}

// TestJoinSystemdScopeNoUserBus: with neither DBUS_SESSION_BUS_ADDRESS
// nor a socket $XDG_RUNTIME_DIR/bus the error names the fix, and nothing
// was started (no dbus-launch: PATH has none) or moved.
func TestJoinSystemdScopeNoUserBus(t *testing.T) {
	r := newScopeRig(t, false)
	empty := reachableTempDir(t)
	for _, tc := range []struct{ name, env, want string }{
		{"both unset", "", "DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset"},
		{"no socket", "XDG_RUNTIME_DIR=" + empty, "DBUS_SESSION_BUS_ADDRESS is unset and there is no socket $XDG_RUNTIME_DIR/bus (" + empty + "/bus)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := r.runHelper(t, "error", tc.env, "PATH=/nonexistent")
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			for _, want := range []string{
				"join error: no user systemd: " + tc.want,
				"so there is no user bus to ask your systemd for a delegated cgroup on: run it under systemd-run --user --scope -p Delegate=yes, or as root\n",
				"own cgroup: /" + filepath.Base(r.top) + "/session.scope\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("helper did not report %q", want)
				}
			}
		})
	}
}

// scopeRig is a user's login session as these tests model it: a
// root-owned cgroup v2 (session) for the user's process to start in, a
// sibling place (top) for systemd's scopes, and optionally the fake
// systemd on a private bus.
type scopeRig struct {
	top, session string
	sessionFD    *os.File
	bin          string       // a copy of the test binary the user can run
	busDir, addr string       // the bus's directory (its socket is busDir/bus) and address
	fake         *fakeSystemd // nil without a bus
}

var rigs atomic.Int32

func newScopeRig(t *testing.T, bus bool) *scopeRig {
	unified := hugetlbUnified(t)
	r := &scopeRig{top: filepath.Join(unified, fmt.Sprintf("go-runtime-sandbox-test-%d-%d", os.Getpid(), rigs.Add(1)))}
	if err := os.Mkdir(r.top, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupTree(t, r.top) })
	if err := os.WriteFile(filepath.Join(r.top, "cgroup.subtree_control"), []byte("+hugetlb"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.session = filepath.Join(r.top, "session.scope")
	if err := os.Mkdir(r.session, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(r.session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	r.sessionFD = fd
	r.bin = copyTestBinary(t)
	if bus {
		r.busDir = reachableTempDir(t)
		r.addr = privateBus(t, r.busDir, delegateeUID)
		r.fake = &fakeSystemd{parent: r.top, owner: delegateeUID}
		serveFakeSystemd(t, r.addr, r.fake)
	}
	return r
}

// runHelper runs scopeHelper(mode) as the delegatee, born in the session
// cgroup, with env, and returns its output and pid.
func (r *scopeRig) runHelper(t *testing.T, mode string, env ...string) (string, int, error) {
	t.Helper()
	cmd := exec.Command(r.bin, "-test.run=^$")
	cmd.Env = []string{scopeHelperEnv + "=" + mode}
	for _, e := range env {
		if e != "" {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: delegateeUID, Gid: delegateeUID, Groups: []uint32{}},
		UseCgroupFD: true, CgroupFD: int(r.sessionFD.Fd()),
	}
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	err := cmd.Wait()
	t.Logf("helper %q as uid %d (pid %d):\n%s", mode, delegateeUID, cmd.Process.Pid, out.String())
	return out.String(), cmd.Process.Pid, err
}

// scopeHelper runs as the delegatee in a cgroup it cannot write. "join":
// it asks for a scope and reports where it ended up, whether a controller
// can then be enabled for the scope's children, and what a second call
// finds. "error": it asks and reports the error and its cgroup.
func scopeHelper(mode string) int {
	if os.Geteuid() == 0 {
		fmt.Println("helper runs as root")
		return 2
	}
	_, unified, err := mountedControllers()
	if err != nil || unified == "" {
		fmt.Println("no cgroup2 mount:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	own := func() string { o, _ := ownCgroups(); return o[""] }
	switch mode {
	case "join":
		if mounts, _, _ := mountedControllers(); mounts["memory"] != "" && mounts["pids"] != "" {
			s, err := JoinSystemdScope(ctx) // v1's way: none
			fmt.Println("on this host's v1 memory and pids:", s, err)
		}
		s, err := joinScope(ctx, unified)
		if err != nil || s == nil {
			fmt.Println("join:", s, err)
			return 1
		}
		fmt.Printf("scope: %s made=%t\n", s.Unit, s.Made)
		fmt.Printf("own cgroup: %s\n", own())
		if _, err := enableControllers(s.Cgroup, []string{"hugetlb"}, nil); err != nil {
			fmt.Println("enabled:", err)
			return 1
		}
		fmt.Println("enabled: ok")
		fmt.Printf("own cgroup after enabling: %s\n", own())
		if !reportChild(s.Cgroup) {
			return 1
		}
		again, err := joinScope(ctx, unified)
		if err != nil || again == nil {
			fmt.Println("again:", again, err)
			return 1
		}
		fmt.Printf("again: %s made=%t\n", again.Unit, again.Made)
	case "error":
		s, err := joinScope(ctx, unified)
		fmt.Println("join error:", err)
		fmt.Printf("own cgroup: %s\n", own())
		if err == nil {
			fmt.Println("joined:", s)
			return 1
		}
	default:
		fmt.Println("unknown mode", mode)
		return 2
	}
	return 0
}

// hugetlbUnified returns this host's cgroup2 mount with the hugetlb
// controller enabled for its children until the test ends; it skips
// without root, a cgroup2 mount, or hugetlb on it.
func hugetlbUnified(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to delegate a cgroup")
	}
	_, unified, err := mountedControllers()
	if err != nil || unified == "" {
		t.Skipf("no cgroup2 mount here (%v)", err)
	}
	data, _ := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if !slices.Contains(strings.Fields(string(data)), "hugetlb") {
		t.Skipf("the cgroup2 mount %s offers no hugetlb controller (it has %q)", unified, strings.TrimSpace(string(data)))
	}
	rootCtl := filepath.Join(unified, "cgroup.subtree_control")
	before, _ := os.ReadFile(rootCtl)
	if err := os.WriteFile(rootCtl, []byte("+hugetlb"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(before), "hugetlb") {
		t.Cleanup(func() { _ = os.WriteFile(rootCtl, []byte("-hugetlb"), 0o644) })
	}
	return unified
}

// reachableTempDir is a temporary directory the delegatee can enter
// (t.TempDir's and its parent's mode is 0700).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// copyTestBinary copies this binary where the delegatee can run it (go
// test's is in a directory only root can enter).
func copyTestBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(reachableTempDir(t), "cgroups.test")
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// removeCgroupTree removes the cgroup dir and every cgroup below it,
// deepest first; the kernel frees a cgroup shortly after its last
// process is reaped, so each removal is retried for a while.
func removeCgroupTree(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(t, filepath.Join(dir, e.Name()))
		}
	}
	for i := 0; ; i++ {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if i == 100 {
			procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			t.Errorf("remove cgroup %s: %v (processes: %s)", dir, err, strconv.Quote(string(procs)))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
