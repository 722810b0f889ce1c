package server

import (
	"log/slog"
	"os/exec"
	"testing"
	"time"
)

// TestZombiePeekLeavesStatus: the reaper's cheap check sees an exited
// child without reaping it, so os/exec still gets its exit status.
func TestZombiePeekLeavesStatus(t *testing.T) {
	r := newReaper(slog.New(slog.DiscardHandler))
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	if err := r.Start(cmd); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !r.zombie() {
		if time.Now().After(deadline) {
			t.Fatal("zombie() never saw the exited child")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Wait()
	r.Done(cmd.Process.Pid)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("exit status after the peek: %v, want 7", cmd.ProcessState)
	}
}
