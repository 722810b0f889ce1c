package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zombieParentEnv makes the test binary a parent of zombies
// (zombieParent): on "fork" it starts children that exit at once and
// leaves them unreaped; on "reap" it reaps them.
const zombieParentEnv = "CGROUPS_TEST_ZOMBIE_PARENT"

// zombies is how many children zombieParent leaves unreaped.
const zombies = 5

func zombieParent() int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "fork":
			for range zombies {
				// Not os/exec: nothing may wait for these children.
				if _, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{}); err != nil {
					fmt.Fprintln(os.Stderr, "fork:", err)
					return 1
				}
			}
			// Wait until all have exited (zombies), without reaping them.
			for {
				n := 0
				for _, c := range children() {
					if c.state == "Z" {
						n++
					}
				}
				if n == zombies {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			fmt.Println("zombies")
		case "reap":
			for range zombies {
				var ws syscall.WaitStatus
				if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
					fmt.Fprintln(os.Stderr, "wait4:", err)
					return 1
				}
			}
			fmt.Println("reaped")
		}
	}
	return 0
}

type child struct{ state string }

// children lists the calling process's children and their states (each
// thread's: a child is listed under the thread that forked it).
func children() []child {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []child
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			stat, err := os.ReadFile("/proc/" + f + "/stat")
			if err != nil {
				continue
			}
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
				out = append(out, child{state: s[i+2 : i+3]})
			}
		}
	}
	return out
}

// TestKillWaitsForReaping: Kill returns only once what it killed is no
// longer counted against pids.max. An exited process leaves cgroup.procs
// before its parent reaps it, yet counts until then: a command started
// as Kill returned could find the group still full of a fork bomb's
// zombies ("Cannot fork"). Real cgroup, real zombies.
func TestKillWaitsForReaping(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes a cgroup of its own: root only (the local backend's tests cover a user's delegated group)")
	}
	cg, err := New(fmt.Sprintf("test-kill-%d", os.Getpid()), Limits{MemoryBytes: 256 << 20, Processes: 64, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Remove(); err != nil {
			t.Errorf("remove the cgroup: %v", err)
		}
	})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), zombieParentEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	say := func(cmd, want string) {
		t.Helper()
		if _, err := fmt.Fprintln(stdin, cmd); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() || out.Text() != want {
			t.Fatalf("helper answered %q to %q, want %q (%v)", out.Text(), cmd, want, out.Err())
		}
	}
	say("fork", "zombies")
	if n := current(t, cg); n <= zombies {
		t.Fatalf("pids.current %d with %d zombies and their parent: the zombies are not counted, nothing to test", n, zombies)
	}

	keep := map[int]bool{cmd.Process.Pid: true}
	done := make(chan error, 1)
	go func() { done <- cg.Kill(keep) }()
	// However long this waits, a correct Kill cannot return before the
	// reaping below; the wait only gives a wrong one the time to show.
	select {
	case err := <-done:
		t.Fatalf("Kill returned (%v) while pids.current counted %d tasks, %d of them unreaped zombies", err, current(t, cg), zombies)
	case <-time.After(300 * time.Millisecond):
	}
	say("reap", "reaped")
	if err := <-done; err != nil {
		t.Fatalf("Kill after the zombies were reaped: %v", err)
	}
}

func current(t *testing.T, cg *Cgroup) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cg.Pids, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
