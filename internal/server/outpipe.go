package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// pipeGrace is how long a command's output pipes may stay open after its
// main process exited (a backgrounded child still holding them) before the
// server stops waiting for more and answers. What the pipes already hold
// then is still read (see outputPipe.drain).
const pipeGrace = 250 * time.Millisecond

// drainMax bounds the final read of a pipe whose grace has passed: a
// backgrounded child writing without pause could otherwise refill it as
// fast as it is read. It is as much as an unprivileged process can make a
// pipe hold (pipe-max-size, 1 MiB by default; 64 KiB unless resized).
const drainMax = 1 << 20

// outputPipe carries one output stream of a command into dst. The server
// owns both ends, unlike os/exec's own pipes, which its WaitDelay closes
// with whatever they still hold unread: on a loaded host the reader may
// not have run at all in that time, and the command's output was lost.
type outputPipe struct {
	r, w *os.File
	dst  io.Writer
	done chan struct{}
}

func newOutputPipe(dst io.Writer) (*outputPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create output pipe: %w", err)
	}
	return &outputPipe{r: r, w: w, dst: dst, done: make(chan struct{})}, nil
}

// started closes the server's copy of the write end (the command holds
// its own) and starts copying.
func (p *outputPipe) started() {
	_ = p.w.Close()
	go p.copy()
}

// copy reads until every writer has closed the pipe, or until the read
// deadline set by finish passes, after which it drains what is left.
func (p *outputPipe) copy() {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.r.Read(buf)
		_, _ = p.dst.Write(buf[:n])
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.drain(buf)
		}
		return
	}
}

// drain reads what the pipe holds right now, up to drainMax, without
// waiting for more (the read end from os.Pipe is non-blocking underneath).
func (p *outputPipe) drain(buf []byte) {
	if p.r.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := p.r.SyscallConn()
	if err != nil {
		return
	}
	left := drainMax
	_ = rc.Read(func(fd uintptr) bool {
		for left > 0 {
			n, err := syscall.Read(int(fd), buf[:min(len(buf), left)])
			if n <= 0 || err != nil {
				break // EAGAIN: empty; 0: no writers left
			}
			_, _ = p.dst.Write(buf[:n])
			left -= n
		}
		return true // never wait for the poller
	})
}

// finish waits for the copy to end, giving writers that still hold the
// pipe until deadline, and closes the read end. (A read end that the
// runtime's poller could not take has no deadline: then the wait lasts
// until the last writer has closed the pipe.)
func (p *outputPipe) finish(deadline time.Time) {
	_ = p.r.SetReadDeadline(deadline)
	<-p.done
	_ = p.r.Close()
}

// abandon closes both ends of a pipe whose command never started.
func (p *outputPipe) abandon() {
	_ = p.w.Close()
	_ = p.r.Close()
}
