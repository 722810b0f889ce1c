// Package procevents carries the process API's command events from the
// companion binary (cmd/sandbox-processapi) to the runtime server, whose
// metrics count them: one text line per event on a pipe the server hands
// the companion. It links nothing but the standard library, so the lean
// server can read what the companion writes.
//
// Lines, each ending in "\n":
//
//	start <id>                              a Start or Execute call began
//	end <id> <exit code> <exited> <bytes>   it ended (exited: true/false; bytes of output sent)
//	stdin <bytes>                           a WriteStdin call carried this many bytes
package procevents

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Observer hears of the commands the process API runs; the runtime
// server's metrics implement it, and so does Writer.
type Observer interface {
	// CommandStarted is called when a Start or Execute call begins; the
	// returned func is called once when it ends, with the exit code,
	// whether the command exited at all (false: it could not start, or the
	// call broke off) and the bytes of output sent.
	CommandStarted() func(exitCode int, exited bool, outputBytes int64)
	// StdinBytes is called with the size of each stdin write received.
	StdinBytes(n int64)
}

// Writer is an Observer that writes each event as a line to w. Write
// errors (the reader is gone) are dropped: metrics never fail a command.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	next uint64
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (e *Writer) line(format string, a ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = fmt.Fprintf(e.w, format+"\n", a...)
}

// CommandStarted writes a start line, and its end line when the returned
// func is called.
func (e *Writer) CommandStarted() func(exitCode int, exited bool, outputBytes int64) {
	e.mu.Lock()
	e.next++
	id := e.next
	e.mu.Unlock()
	e.line("start %d", id)
	var once sync.Once
	return func(exitCode int, exited bool, outputBytes int64) {
		once.Do(func() { e.line("end %d %d %t %d", id, exitCode, exited, outputBytes) })
	}
}

// StdinBytes writes a stdin line.
func (e *Writer) StdinBytes(n int64) { e.line("stdin %d", n) }

// Read replays the events read from r into o until r ends (the writer
// exited or closed its end), then ends every command still open as not
// exited, so in-flight counts drop back. It returns the first read error
// other than EOF; lines it does not understand are skipped.
func Read(r io.Reader, o Observer) error {
	open := map[string]func(int, bool, int64){}
	defer func() {
		for _, end := range open {
			end(-1, false, 0)
		}
	}()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "start":
			if _, dup := open[f[1]]; !dup {
				open[f[1]] = o.CommandStarted()
			}
		case len(f) == 5 && f[0] == "end":
			end, ok := open[f[1]]
			code, err1 := strconv.Atoi(f[2])
			exited, err2 := strconv.ParseBool(f[3])
			n, err3 := strconv.ParseInt(f[4], 10, 64)
			if !ok || err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			delete(open, f[1])
			end(code, exited, n)
		case len(f) == 2 && f[0] == "stdin":
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				o.StdinBytes(n)
			}
		}
	}
	return sc.Err()
}
