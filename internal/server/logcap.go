package server

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// A sandbox's commands reach its server (and its process API companion)
// and so decide how much it logs: one request, one "request" line. Where
// the log is a file on the host (a local sandbox's server.log), a command
// flooding the server would grow that file without end, outside the
// sandbox's disk quota. capLog bounds it.

// capLog returns w, or, when w is a regular file and max > 0, a writer
// into it that empties the file each time it has grown past max bytes and
// starts it again with a line saying so: the file never holds much more
// than max bytes, and it keeps the latest lines, the ones that tell why a
// server stopped. The size is the file's own, so other writers of the
// same file (the companion, given Stderr) count too. Lines are written
// whole, each with one Write.
func capLog(w io.Writer, max int64) io.Writer {
	f, ok := w.(*os.File)
	if !ok || max <= 0 {
		return w
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return w
	}
	return &cappedLog{f: f, max: max}
}

type cappedLog struct {
	mu  sync.Mutex
	f   *os.File
	max int64
}

func (c *cappedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fi, err := c.f.Stat(); err == nil && fi.Size()+int64(len(p)) > c.max {
		// A file not opened for appending also needs its offset back at
		// the start, or the next write would leave a hole as large as
		// what was dropped.
		if err := c.f.Truncate(0); err == nil {
			_, _ = c.f.Seek(0, io.SeekStart)
			fmt.Fprintf(c.f, `{"time":%q,"level":"WARN","msg":"log emptied: it reached its cap (--log-max-bytes); earlier lines were dropped","dropped_bytes":%d}`+"\n",
				time.Now().UTC().Format(time.RFC3339Nano), fi.Size())
		}
	}
	return c.f.Write(p)
}
