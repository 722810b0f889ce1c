package local_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestReadThroughSymlinkOutSaysSo: reading a symlink a command pointed
// out of /app fails with ErrPathEscape and an error naming the symlink
// and its target, not only "Access denied"; the file outside stays
// unread.
func TestReadThroughSymlinkOutSaysSo(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	mustOK(t, s, goruntime.Request{Command: "ln -s /etc/passwd pw"})
	data, err := s.ReadFile(context.Background(), "pw")
	if !errors.Is(err, goruntime.ErrPathEscape) || !strings.Contains(err.Error(), "pw is a symlink to /etc/passwd") {
		t.Fatalf("ReadFile(pw) = %q, %v; want ErrPathEscape naming the symlink", data, err)
	}
}
