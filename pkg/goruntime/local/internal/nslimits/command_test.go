package nslimits

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
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
		if !strings.HasPrefix(f.Name(), "/proc/") {
			t.Errorf("the child's descriptor %d is %s, want a namespace of the process", 3+i, f.Name())
		}
	}
	if got := strings.Join(cmd.Args, " "); !strings.Contains(got, "--mount=/proc/self/fd/") || strings.Contains(got, "/proc/"+strconv.Itoa(c.Process.Pid)) {
		t.Errorf("nsenter's arguments %q: want the namespaces as the child's descriptors, never the pid's /proc path", got)
	}
}
