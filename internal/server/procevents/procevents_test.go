package procevents

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// recorder is an Observer that logs what it hears.
type recorder struct{ log []string }

func (r *recorder) CommandStarted() func(int, bool, int64) {
	n := len(r.log)
	r.log = append(r.log, "start")
	return func(code int, exited bool, out int64) {
		r.log = append(r.log, fmt.Sprintf("end of %d: %d %t %d", n, code, exited, out))
	}
}

func (r *recorder) StdinBytes(n int64) { r.log = append(r.log, fmt.Sprintf("stdin %d", n)) }

// TestWriterToRead: what a Writer writes, Read replays; a command still
// open when the stream ends (its companion died) ends as not exited, so
// in-flight counts drop back; lines it does not understand are skipped.
func TestWriterToRead(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	end1 := w.CommandStarted()
	w.CommandStarted() // never ends: the companion dies
	w.StdinBytes(7)
	end1(3, true, 12)
	end1(4, true, 99) // a second call is ignored
	buf.WriteString("bogus line\nend 99 0 true 1\n")

	r := &recorder{}
	if err := Read(strings.NewReader(buf.String()), r); err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "start", "stdin 7", "end of 0: 3 true 12", "end of 1: -1 false 0"}
	if fmt.Sprint(r.log) != fmt.Sprint(want) {
		t.Fatalf("replayed %q\nwant     %q", r.log, want)
	}
}
