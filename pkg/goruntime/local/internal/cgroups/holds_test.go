package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHolds: Holds fails for a process outside any of the sandbox's
// cgroups and passes once it is in all of them, also for a process that
// moved its own thread (ThreadFiles) and then exec'd, as a gate does.
// Real v1 cgroups, root.
func TestHolds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes a cgroup of its own: root only")
	}
	cg, err := New(fmt.Sprintf("test-holds-%d", os.Getpid()), Limits{MemoryBytes: 64 << 20, Processes: 16, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Remove(); err != nil {
			t.Errorf("remove the cgroup: %v", err)
		}
	})
	start := func(script string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}

	outside := start("exec sleep 600")
	if err := cg.Holds(outside.Process.Pid); err == nil {
		t.Fatal("Holds passed for a process outside the cgroups")
	}
	if err := cg.Add(outside.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cg.Holds(outside.Process.Pid); err != nil {
		t.Fatalf("after Add: %v", err)
	}

	files := cg.ThreadFiles()
	if cg.V2 {
		if files != nil {
			t.Fatalf("ThreadFiles on v2: %v, want none", files)
		}
		return
	}
	if len(files) != len(cg.dirs()) {
		t.Fatalf("ThreadFiles %v for dirs %v", files, cg.dirs())
	}
	// A shell is one thread: it moves itself, then becomes sleep.
	script := ""
	for _, f := range files {
		if filepath.Base(f) != "tasks" {
			t.Fatalf("thread file %s: want a tasks file", f)
		}
		script += "echo 0 > " + f + " && "
	}
	joined := exec.Command("/bin/sh", "-c", script+"echo joined && exec sleep 600")
	out, err := joined.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := joined.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = joined.Process.Kill(); _ = joined.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "joined\n" {
		t.Fatalf("the shell said %q (%v), want it joined", line, err)
	}
	if err := cg.Holds(joined.Process.Pid); err != nil {
		t.Fatalf("a process that joined by its thread files: %v", err)
	}
}
