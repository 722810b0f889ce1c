package server

import (
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestFileCallsTakeTurns: with Config.FileCalls 1, a second file call
// waits while an upload is under way and runs once it ends. Each file
// call may hold an OS thread in a blocking system call, and a sandbox
// whose task limit is full gives the server no new thread (the Go runtime
// then aborts): unbounded, many calls at once took the server past the
// threads it reserved (pkg/goruntime/local
// TestServerSurvivesFullProcessTable, under load: "failed to create new
// OS thread (have 24 already)").
func TestFileCallsTakeTurns(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.FileCalls = 1 })

	body, feed := io.Pipe()
	t.Cleanup(func() { feed.Close() }) // before the server's close, which waits for the upload
	mw := multipart.NewWriter(feed)
	uploaded := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/upload", mw.FormDataContentType(), body)
		if err != nil {
			uploaded <- -1
			return
		}
		resp.Body.Close()
		uploaded <- resp.StatusCode
	}()
	part, err := mw.CreateFormFile("file", "slow.txt")
	if err != nil {
		t.Fatal(err)
	}
	// The handler has the request once it reads the part: the upload
	// holds the one slot from here until its body ends.
	if _, err := part.Write([]byte("first bytes")); err != nil {
		t.Fatal(err)
	}

	listed := make(chan int, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/list/.")
		if err != nil {
			listed <- -1
			return
		}
		resp.Body.Close()
		listed <- resp.StatusCode
	}()
	// However long this waits, a bounded server cannot answer the list
	// before the upload ends; the wait only gives an unbounded one the
	// time to show.
	select {
	case code := <-listed:
		t.Fatalf("list answered %d while the only file slot was held by an upload", code)
	case <-time.After(300 * time.Millisecond):
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if code := <-uploaded; code != http.StatusOK {
		t.Fatalf("upload: %d", code)
	}
	if code := <-listed; code != http.StatusOK {
		t.Fatalf("list after the upload: %d", code)
	}
}
