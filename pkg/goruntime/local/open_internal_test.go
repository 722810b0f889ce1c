package local

import (
	"slices"
	"testing"
)

// TestOpeningFinish: a start's cleanups run last first; the undos only
// when the start failed, the others either way.
func TestOpeningFinish(t *testing.T) {
	for _, ok := range []bool{false, true} {
		var ran []string
		o := &opening{}
		o.always(func() { ran = append(ran, "slot") })
		o.undo(func() { ran = append(ran, "dir") })
		o.always(func() { ran = append(ran, "refill") })
		o.undo(func() { ran = append(ran, "cgroup") })
		o.finish(ok)
		want := []string{"cgroup", "refill", "dir", "slot"}
		if ok {
			want = []string{"refill", "slot"}
		}
		if !slices.Equal(ran, want) {
			t.Errorf("finish(%v) ran %v, want %v", ok, ran, want)
		}
	}
}

// TestOpenStepsUndoWhatTheyMade: a step that fails after an earlier
// step made something undoes it, and what it pushed itself before it
// failed, but not the cleanups of a step never reached.
func TestOpenStepsUndoWhatTheyMade(t *testing.T) {
	var ran []string
	o := &opening{}
	err := o.run(
		func() error { o.undo(func() { ran = append(ran, "first") }); return nil },
		func() error {
			o.undo(func() { ran = append(ran, "second, half made") })
			return errFailedStep
		},
		func() error { o.undo(func() { ran = append(ran, "never") }); return nil },
	)
	if err != errFailedStep {
		t.Errorf("run = %v, want the failed step's error", err)
	}
	if want := []string{"second, half made", "first"}; !slices.Equal(ran, want) {
		t.Errorf("undid %v, want %v", ran, want)
	}
}

var errFailedStep = errorString("step failed")

type errorString string

func (e errorString) Error() string { return string(e) }
