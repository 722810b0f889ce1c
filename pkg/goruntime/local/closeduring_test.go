package local_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestCloseDuringExecute: a Close from another goroutine while a command
// runs makes that command's call fail with an error wrapping
// goruntime.ErrClosed ("closed ... while the call ran"), not
// ErrSandboxGone: the sandbox did not die, the caller ended it. Through
// Session.Execute, Session.ExecuteStream (the gRPC stream) and
// Sandbox.Exec.
func TestCloseDuringExecute(t *testing.T) {
	b := newBackend(t, testOptions())
	check := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, goruntime.ErrClosed) || errors.Is(err, goruntime.ErrSandboxGone) {
			t.Fatalf("call cut by Close: %v; want ErrClosed, not ErrSandboxGone", err)
		}
		t.Logf("error: %v", err)
	}
	// closeWhile starts call, gives its command 3 s to be running in the
	// sandbox, then runs closeFn from this goroutine and returns call's error.
	closeWhile := func(t *testing.T, call func() error, closeFn func() error) error {
		t.Helper()
		errc := make(chan error, 1)
		go func() { errc <- call() }()
		select {
		case err := <-errc:
			t.Fatalf("the command ended before Close: %v", err)
		case <-time.After(3 * time.Second):
		}
		if err := closeFn(); err != nil {
			t.Errorf("close: %v", err)
		}
		select {
		case err := <-errc:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the call did not return within a minute of Close")
		}
		return nil
	}
	req := goruntime.Request{Command: "sleep 30", Timeout: time.Minute}
	t.Run("Session.Execute", func(t *testing.T) {
		s, err := goruntime.Open(context.Background(), b, goruntime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = closeWhile(t, func() error {
			_, err := s.Execute(context.Background(), req)
			return err
		}, func() error { return s.Close(context.Background()) })
		check(t, err)
	})
	t.Run("Session.ExecuteStream", func(t *testing.T) {
		s, err := goruntime.Open(context.Background(), b, goruntime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = closeWhile(t, func() error {
			_, err := s.ExecuteStream(context.Background(), req, func(goruntime.Chunk) {})
			return err
		}, func() error { return s.Close(context.Background()) })
		check(t, err)
	})
	t.Run("Sandbox.Exec", func(t *testing.T) {
		sb, err := b.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = closeWhile(t, func() error {
			_, err := sb.Exec(context.Background(), goruntime.ExecRequest{Command: "sleep 30", Timeout: time.Minute})
			return err
		}, func() error { return sb.Close(context.Background()) })
		check(t, err)
	})
}
