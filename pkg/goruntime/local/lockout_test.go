package local_test

import (
	"context"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestCommandCannotLockOutWorkDir: a command that takes its own rights
// away from /app (`chmod 000 /app`, as the sandbox user that owns it)
// does not leave the session unusable: the next call's files land, its
// command starts, and Reset works.
func TestCommandCannotLockOutWorkDir(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	ctx := context.Background()
	if res, err := s.Execute(ctx, goruntime.Request{Command: "echo kept > keep.txt && chmod 000 /app"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("chmod 000 /app: %+v %v", res, err)
	}
	res, err := s.Execute(ctx, goruntime.Request{
		Files:   []goruntime.File{{Path: "new.txt", Data: []byte("new")}},
		Command: "cat keep.txt new.txt",
	})
	if err != nil || res.ExitCode != 0 || res.Stdout != "kept\nnew" {
		t.Fatalf("the call after chmod 000 /app: %+v %v", res, err)
	}
	if _, err := s.Execute(ctx, goruntime.Request{Command: "chmod 000 /app"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx); err != nil {
		t.Fatalf("Reset after chmod 000 /app: %v", err)
	}
}
