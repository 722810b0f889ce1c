package server

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCommandsGetOnlyTheirStreams: a descriptor the server's process
// holds without close-on-exec (one it inherited, or one opened without
// the flag after its start) is not passed to a command: the command has
// its three standard streams and nothing else.
func TestCommandsGetOnlyTheirStreams(t *testing.T) {
	ts := startServer(t, nil)
	f, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leaked, err := syscall.Dup(int(f.Fd())) // no close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	// No pipeline: the shell would hold its pipe while ls lists.
	res := ts.run(t, `ls /proc/$$/fd`)
	if got, want := strings.Fields(res.Stdout), "0 1 2"; strings.Join(got, " ") != want {
		t.Errorf("a command's descriptors: %q, want %q (this process leaves fd %s open without close-on-exec)", got, want, strconv.Itoa(leaked))
	}
	if strings.TrimSpace(res.Stderr) != "" {
		t.Errorf("stderr: %q", res.Stderr)
	}
}
