package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestServerSurvivesFullProcessTable keeps the sandbox's task limit full
// (bash retries a failed fork, so every freed slot is taken again at once)
// and meanwhile sends the runtime server concurrent calls that block in
// system calls: uploads, downloads, listings and execs that cannot fork.
// The pids cgroup counts threads, and the Go runtime aborts when it cannot
// start a thread it needs ("pthread_create failed: Resource temporarily
// unavailable"), so without the threads the server reserves at start
// (--os-threads) this loses the sandbox. Every call must be answered, the
// command must report the process limit, and the sandbox must still work.
func TestServerSurvivesFullProcessTable(t *testing.T) {
	opts := testOptions()
	opts.Processes = 64
	s := openSession(t, newBackend(t, opts))
	sb := s.Sandbox()
	ctx := context.Background()

	filled := make(chan struct{})
	var fill *goruntime.ExecResult
	var fillErr error
	go func() {
		defer close(filled)
		fill, fillErr = sb.Exec(ctx, goruntime.ExecRequest{Command: "exec bash -c 'while :; do sleep 5 & done' 2>/dev/null", Timeout: 6 * time.Second})
	}()
	time.Sleep(time.Second) // the table is full

	const workers, rounds = 64, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	gone := func(what string, err error) {
		if errors.Is(err, goruntime.ErrSandboxGone) {
			errs <- fmt.Errorf("%s: %w", what, err)
		}
	}
	for i := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("w%d.txt", i)
			for range rounds {
				gone("upload "+name, sb.WriteFile(ctx, name, bytes.NewReader(bytes.Repeat([]byte{'x'}, 4<<20))))
				_, err := sb.ReadFile(ctx, name)
				gone("download "+name, err)
				_, err = sb.List(ctx, ".")
				gone("list", err)
				_, err = sb.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: 10 * time.Second})
				gone("exec", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("while the task limit was full: %v", err)
	}
	<-filled
	if fillErr != nil {
		t.Fatalf("the command that filled the task limit: %v", fillErr)
	}
	if fill.Limit != goruntime.LimitProcesses {
		t.Errorf("the command that filled the task limit: Limit %q, want %q (exit %d)", fill.Limit, goruntime.LimitProcesses, fill.ExitCode)
	}
	mustOK(t, s, goruntime.Request{Command: "echo still here"})
}
