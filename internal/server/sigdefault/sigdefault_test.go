package sigdefault

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// helperEnv makes the test binary a helper that prints the SigIgn mask a
// program it execs starts with, after ForChildren when its value is "on".
const helperEnv = "SIGDEFAULT_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	if mode == "on" {
		taken, left, err := ForChildren(context.Background(), slog.New(slog.DiscardHandler))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "taken %v, left %v\n", taken, left)
	}
	out, err := exec.Command("cat", "/proc/self/status").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := ignoredMask(string(out))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%016x\n", m)
	return 0
}

// underIgnoringShell runs the helper in mode with sigs ignored by its
// parent (an empty trap in a shell survives execve) and returns the SigIgn mask
// the helper's child started with.
func underIgnoringShell(t *testing.T, mode string, sigs ...syscall.Signal) (mask string, stderr string) {
	t.Helper()
	var nums []string
	for _, s := range sigs {
		nums = append(nums, fmt.Sprint(int(s)))
	}
	cmd := exec.Command("/bin/sh", "-c", "trap '' "+strings.Join(nums, " ")+`; exec "$@"`, "sh", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", mode, err, errb.String())
	}
	return strings.TrimSpace(string(out)), errb.String()
}

// TestForChildren: under a parent that ignores SIGHUP, SIGINT, SIGPIPE,
// SIGTERM and SIGTSTP, a Go program's exec'd children inherit SIGHUP,
// SIGINT and SIGTSTP ignored (the Go runtime catches the others at start);
// after ForChildren they inherit nothing ignored.
func TestForChildren(t *testing.T) {
	sigs := []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE, syscall.SIGTERM, syscall.SIGTSTP}
	const leaked = 1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGTSTP-1)
	// The go test run itself may have more ignored (nohup): at least these.
	off, _ := underIgnoringShell(t, "off", sigs...)
	if m, err := strconv.ParseUint(off, 16, 64); err != nil || m&leaked != leaked {
		t.Errorf("without ForChildren a child starts with SigIgn %s, want at least %016x (the premise of this package)", off, leaked)
	}
	// 32 and 33 stay as inherited (GNU make ignores both for its recipes).
	const libc = 1<<31 | 1<<32
	on, stderr := underIgnoringShell(t, "on", sigs...)
	if m, err := strconv.ParseUint(on, 16, 64); err != nil || m&^libc != 0 {
		t.Errorf("after ForChildren a child starts with SigIgn %s, want none but 32 and 33\n%s", on, stderr)
	}
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTSTP} {
		if !strings.Contains(stderr, s.String()) {
			t.Errorf("ForChildren reported %q, want %v among the signals taken", stderr, s)
		}
	}
}

func TestIgnoredMask(t *testing.T) {
	m, err := ignoredMask("Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000380001\nSigCgt:\t0\n")
	if err != nil || m != 0x380001 {
		t.Errorf("got %x, %v", m, err)
	}
	if _, err := ignoredMask("Name:\tx\n"); err == nil {
		t.Error("no SigIgn line: no error")
	}
}
