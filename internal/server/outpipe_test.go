package server

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slowWriter stands for a copier the host's scheduler did not run: its
// first Write takes longer than the pipes' grace.
type slowWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	delay time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	time.Sleep(w.delay)
	w.delay = 0
	return w.buf.Write(p)
}

// A command's output already in the pipe when the grace passes is kept,
// even when a backgrounded child still holds the pipe open and the copy
// was behind (os/exec's WaitDelay closed the pipe and lost it).
func TestOutputPipeKeepsBufferedOutputPastGrace(t *testing.T) {
	dst := &slowWriter{delay: 300 * time.Millisecond}
	p, err := newOutputPipe(dst)
	if err != nil {
		t.Fatal(err)
	}
	held := dupFile(t, p.w) // the background child's copy of the write end
	if size, err := unix.FcntlInt(held.Fd(), unix.F_GETPIPE_SZ, 0); err != nil || size < 64<<10 {
		t.Skipf("the pipe holds %d bytes (%v), under the 64 KiB this test writes before anyone reads", size, err)
	}
	want := strings.Repeat("0123456789abcdef", 60<<10/16) // more than one read of the copy, less than the pipe holds
	if _, err := held.WriteString(want); err != nil {
		t.Fatal(err)
	}
	p.started()
	start := time.Now()
	p.finish(time.Now().Add(50 * time.Millisecond))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("finish took %v with the pipe still held", took)
	}
	if got := dst.buf.String(); got != want {
		t.Fatalf("kept %d of %d bytes", len(got), len(want))
	}
	_ = held.Close()
}

// A pipe whose writers are all gone ends the copy at once, grace or not.
func TestOutputPipeEndsAtEOF(t *testing.T) {
	var dst slowWriter
	p, err := newOutputPipe(&dst)
	if err != nil {
		t.Fatal(err)
	}
	held := dupFile(t, p.w)
	_, _ = held.WriteString("out\n")
	_ = held.Close()
	p.started()
	start := time.Now()
	p.finish(time.Now().Add(time.Hour))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("finish waited %v after every writer closed", took)
	}
	if got := dst.buf.String(); got != "out\n" {
		t.Fatalf("got %q", got)
	}
}

func dupFile(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), f.Name())
}
