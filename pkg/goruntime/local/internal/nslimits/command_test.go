package nslimits

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSandboxCommandPinsTheProcess: SandboxCommand enters the
// namespaces of the process the caller's check saw, or none. A check
// that refuses the pid fails the call; a process that ends after its
// namespaces were opened (so its pid could name another process by the
// time nsenter runs) fails it too.
func TestSandboxCommandPinsTheProcess(t *testing.T) {
	ctx := context.Background()
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "100")
		if os.Geteuid() != 0 {
			// A user enters only namespaces nested in a user namespace it
			// made, as a sandbox's are (enter.go).
			c = exec.Command("unshare", "--user", "--map-root-user", "unshare", "--user", "--map-root-user", "--mount", "sleep", "100")
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		waitExec(t, c.Process.Pid, "sleep")
		return c
	}

	c := start()
	refused := errors.New("not one of the sandbox's processes")
	if cmd, _, err := SandboxCommand(ctx, c.Process.Pid, func(int) error { return refused }, "true"); !errors.Is(err, refused) || cmd != nil {
		t.Errorf("a pid the check refuses: got %v, %v; want the check's error and no command", cmd, err)
	}

	c = start()
	ended := func(pid int) error {
		c.Process.Kill()
		c.Wait()
		return nil // the pid was the sandbox's when the check looked
	}
	if cmd, _, err := SandboxCommand(ctx, c.Process.Pid, ended, "true"); err == nil || !strings.Contains(err.Error(), "ended") || cmd != nil {
		t.Errorf("a process that ended after its namespaces were opened: got %v, %v; want an error saying it ended", cmd, err)
	}

	c = start()
	cmd, done, err := SandboxCommand(ctx, c.Process.Pid, func(int) error { return nil }, "true")
	if err != nil {
		t.Fatalf("a live process the check accepts: %v", err)
	}
	defer done()
	for i, f := range cmd.ExtraFiles {
		// A user's also holds the namespace that owns the process's
		// (ownerOf), found through the process's own.
		if !strings.HasPrefix(strings.TrimPrefix(f.Name(), "userns-of-"), "/proc/") {
			t.Errorf("the child's descriptor %d is %s, want a namespace of the process", 3+i, f.Name())
		}
	}
	if got := strings.Join(cmd.Args, " "); !strings.Contains(got, "--mount=/proc/self/fd/") || strings.Contains(got, "/proc/"+strconv.Itoa(c.Process.Pid)) {
		t.Errorf("nsenter's arguments %q: want the namespaces as the child's descriptors, never the pid's /proc path", got)
	}
}

// TestSandboxCommandSetgroupsDenied: a process in a user namespace that
// denies setgroups (as bubblewrap makes one without subordinate ids) is
// entered as its own ids. Real namespaces. As a user (nested in one of
// its own, as a sandbox's are) this failed with nsenter's "setgroups
// failed" before SandboxCommand went through setpriv there; as root
// nsenter needs no setgroups in the namespace.
func TestSandboxCommandSetgroupsDenied(t *testing.T) {
	c := exec.Command("unshare", "--user", "--mount", "--map-user=1000", "--map-group=1000", "sleep", "100")
	if os.Geteuid() != 0 {
		c = exec.Command("unshare", "--user", "--map-root-user",
			"unshare", "--user", "--mount", "--map-user=1000", "--map-group=1000", "sleep", "100")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	waitExec(t, pid, "sleep")
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/setgroups", pid)); err != nil || strings.TrimSpace(string(data)) != "deny" {
		t.Fatalf("setgroups of the namespace: %q, %v; want deny", data, err)
	}
	cmd, done, err := SandboxCommand(context.Background(), pid, func(int) error { return nil }, "id", "-u")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run in a namespace that denies setgroups: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "1000" {
		t.Errorf("id -u in the namespace: %q, want 1000 (the process's own uid there)", got)
	}
}

// TestSandboxCommandOwnIDsSetgroupsDenied: the same for a namespace
// made by a host uid of its own (a root sandbox's): it does not map
// root's uid, so the ids are taken on the way in.
func TestSandboxCommandOwnIDsSetgroupsDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes namespaces as another uid: root only")
	}
	c := exec.Command("setpriv", "--reuid=1960419990", "--regid=1960419990", "--clear-groups",
		"unshare", "--user", "--mount", "--map-user=1000", "--map-group=1000", "sleep", "100")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	waitExec(t, pid, "sleep")
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/setgroups", pid)); err != nil || strings.TrimSpace(string(data)) != "deny" {
		t.Fatalf("setgroups of the namespace: %q, %v; want deny", data, err)
	}
	cmd, done, err := SandboxCommand(context.Background(), pid, func(int) error { return nil }, "id", "-u")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run in a namespace of another uid that denies setgroups: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "1000" {
		t.Errorf("id -u in the namespace: %q, want 1000", got)
	}
}

// waitExec waits until process pid runs the program name: unshare has
// made its namespaces and become the command.
func waitExec(t *testing.T, pid int, name string) {
	t.Helper()
	for {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.HasSuffix(exe, "/"+name) {
			return
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Fatalf("process %d ended before it ran %s", pid, name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
