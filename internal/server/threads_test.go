package server

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestBinaryReservesOSThreads checks that the server binary holds the OS
// threads --os-threads asks for once it listens (the local backend counts
// on them when a command fills the task limit: see
// pkg/goruntime/local TestServerSurvivesFullProcessTable), and not with 0.
func TestBinaryReservesOSThreads(t *testing.T) {
	threads := func(p *proc) int {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/task")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	if n := threads(startBinary(t, nil, "--os-threads", "40")); n < 40 {
		t.Errorf("--os-threads 40: the server has %d threads", n)
	}
	if n := threads(startBinary(t, nil, "--os-threads", "0")); n >= 40 {
		t.Errorf("--os-threads 0: the server has %d threads, as many as a reserve of 40", n)
	}
}

func TestBinaryRejectsBadOSThreads(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  string
	}{
		{[]string{"--os-threads", "-1"}, ""},
		{[]string{"--os-threads", "100000"}, ""},
		{nil, "SANDBOX_OS_THREADS=lots"},
	} {
		cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--base-dir", t.TempDir()}, c.args...)...)
		if c.env != "" {
			cmd.Env = []string{c.env}
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "os-threads") {
			t.Errorf("%v %s: %v, want exit 2 naming os-threads\n%s", c.args, c.env, err, out)
		}
	}
}
