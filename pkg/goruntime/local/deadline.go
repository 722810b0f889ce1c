package local

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Deadlines of the calls that move files (list, read, upload, unpack).
// Exec has its own (execLimit: the command's timeout plus execGrace).
//
// A command can replace the runtime server's socket with a listener of
// its own that accepts and never answers, or reads an upload and never
// answers, so every call has a client-side deadline. A fixed one would cut
// a legitimate large upload short on a slow disk, so it grows with the
// bytes the call has moved so far (sent and received): callFloor plus
// callPerMiB for each MiB. A server that trickles gains nothing: the
// answers are bounded (pkg/goruntime/internal/contract's Client) and
// the uploads are the host's own data, so the total is bounded too.
// When the deadline passes the sandbox is reported stuck (the error wraps
// goruntime.ErrSandboxGone) and stopped: see Sandbox.do.
const (
	// callFloor is the time any file call gets before its first byte
	// moves; a listing of the largest directory a sandbox's disk holds
	// takes a second or two.
	callFloor = 2 * time.Minute
	// callPerMiB is the time added per MiB moved: 1 MiB/s, far below
	// what a loop-mounted disk or a unix socket does on a loaded host.
	callPerMiB = time.Second
)

// errNoAnswer is the cancel cause of a call whose deadline passed.
var errNoAnswer = errors.New("the runtime server did not answer within the call's deadline")

// callLimit is one file call's deadline: floor plus perMiB for each MiB
// counted (by the readers count wraps) since start.
type callLimit struct {
	floor, perMiB time.Duration
	start         time.Time
	moved         atomic.Int64
}

// fileCallLimit returns the deadline of a file call starting now: the
// backend's callDeadlines when a test set them, else callFloor and
// callPerMiB.
func (b *Backend) fileCallLimit() *callLimit {
	l := &callLimit{floor: callFloor, perMiB: callPerMiB, start: time.Now()}
	if d := b.callDeadlines; d.floor > 0 {
		l.floor, l.perMiB = d.floor, d.perMiB
	}
	return l
}

// callDeadlines overrides callFloor and callPerMiB (tests set short ones).
type callDeadlines struct{ floor, perMiB time.Duration }

// allowed is how long the call may take with what it has moved so far.
func (l *callLimit) allowed() time.Duration {
	return l.floor + time.Duration(float64(l.moved.Load())/(1<<20)*float64(l.perMiB))
}

// passed reports whether the call has run past its deadline at now.
func (l *callLimit) passed(now time.Time) bool { return now.Sub(l.start) > l.allowed() }

// cause is the error a call that passed l ends with: what it was doing,
// how long it had, and the suspects.
func (l *callLimit) cause(what string) error {
	return fmt.Errorf("%w: no answer to %s within %s (%s plus %s per MiB moved; %d bytes moved): the server is stuck, or a command replaced its socket with a listener of its own",
		errNoAnswer, what, l.allowed().Round(time.Second), l.floor, l.perMiB, l.moved.Load())
}

// count returns r counting what is read from it toward l's allowance. A
// nil l (a call without a file deadline) returns r.
func (l *callLimit) count(r io.Reader) io.Reader {
	if l == nil {
		return r
	}
	return &countingReader{r: r, n: &l.moved}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
