package procfs

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStatNameWithParensAndSpaces(t *testing.T) {
	line := "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615"
	st, err := parseStat(42, line)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'S' || st.StartTime != 98765 {
		t.Fatalf("stat = %+v, want state S, start 98765", st)
	}
	for _, bad := range []string{"42 no parens", "42 (x) S 1 2", "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 nope"} {
		if _, err := parseStat(42, bad); err == nil {
			t.Errorf("parseStat(%q) = nil error", bad)
		}
	}
}

func TestSelfAliveAndExitedChildGone(t *testing.T) {
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(os.Getpid(), self.StartTime) || !Alive(os.Getpid(), 0) {
		t.Fatal("this process is not alive")
	}
	if Alive(os.Getpid(), self.StartTime+1) {
		t.Fatal("Alive accepted another start time")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Not yet waited for: a zombie once it exits, which counts as gone.
	for Alive(pid, 0) {
		time.Sleep(time.Millisecond)
	}
	if Alive(pid, 0) {
		t.Fatal("a zombie counts as alive")
	}
	_ = cmd.Wait()
	if Alive(pid, 0) || Alive(0, 0) {
		t.Fatal("a reaped pid is not gone")
	}
}
