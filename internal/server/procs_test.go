package server

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sleepToken returns a sleep duration no other process uses, so the
// processes of one test can be found by their argument.
func sleepToken() string {
	return fmt.Sprintf("%d.%06d", 300+rand.IntN(600), rand.IntN(1_000_000))
}

// procInfo is one live process from /proc.
type procInfo struct {
	pid, ppid int
	state     string
}

// readProc reads /proc/pid/status; ok is false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procInfo{}, false
	}
	p := procInfo{pid: pid}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			p.state, _, _ = strings.Cut(v, " ")
		case "PPid":
			p.ppid, _ = strconv.Atoi(v)
		}
	}
	return p, true
}

// withArg lists the processes (zombies included) that have arg among
// their command-line arguments.
func withArg(arg string) []procInfo {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []procInfo
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				if p, ok := readProc(pid); ok {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// running drops zombies: a killed process whose parent has not reaped it
// yet is dead.
func running(ps []procInfo) []procInfo {
	var out []procInfo
	for _, p := range ps {
		if p.state != "Z" && p.state != "X" {
			out = append(out, p)
		}
	}
	return out
}

// waitGone waits (up to 10 s) until no live process has arg, and fails
// the test naming the survivors otherwise. Killed processes vanish within
// milliseconds; the bound only keeps a failing test from hanging.
func waitGone(t *testing.T, arg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := running(withArg(arg))
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with argument %s still running: %+v", arg, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killArg kills every process with arg; for test cleanup.
func killArg(arg string) {
	for _, p := range withArg(arg) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}
