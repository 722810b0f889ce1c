package local_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestFilesIntoFullDisk: a call whose files do not fit the sandbox's full
// disk fails with ErrDiskFull, naming the file (not a temporary one) and
// how to free space; a call without files frees it and the files then
// land.
func TestFilesIntoFullDisk(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	opts.DiskBytes = 64 << 20
	opts.DiskInodes = 16384
	s := openSession(t, newBackend(t, opts))
	run(t, s, goruntime.Request{Command: "head -c 200M /dev/zero > big"})
	files := []goruntime.File{{Path: "main.go", Data: []byte(strings.Repeat("// pad\n", 100000))}}
	_, err := s.Execute(context.Background(), goruntime.Request{Files: files, Command: "true"})
	if !errors.Is(err, goruntime.ErrDiskFull) || !strings.Contains(err.Error(), `"main.go"`) || strings.Contains(err.Error(), ".upload-") || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("files into a full disk: %v; want ErrDiskFull naming main.go and how to free space", err)
	}
	mustOK(t, s, goruntime.Request{Command: "rm big"})
	if res := mustOK(t, s, goruntime.Request{Files: files, Command: "wc -l < main.go"}); strings.TrimSpace(res.Stdout) != "100000" {
		t.Errorf("after freeing space: %q", res.Stdout)
	}
}
