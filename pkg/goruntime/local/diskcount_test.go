package local_test

import (
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestDiskLimitFromCounters: the disk_limit outcome and its note come
// from the disk's own usage, not from text. A command that prints the
// kernel's ENOSPC message (as pty exhaustion makes open("/dev/ptmx")
// print it) on a disk with room is not labelled; one that fills the disk
// and deletes the file only after a while (as the go command deletes its
// work directory) is, by the samples taken while it ran; one that fills
// it and leaves it full is, after it.
func TestDiskLimitFromCounters(t *testing.T) {
	localtest.RequireDiskImage(t)
	opts := testOptions()
	opts.DiskBytes = 64 << 20
	opts.DiskInodes = 16384
	s := openSession(t, newBackend(t, opts))

	res := run(t, s, goruntime.Request{Command: "echo 'open /dev/ptmx: no space left on device' >&2; exit 1"})
	if res.Outcome == goruntime.OutcomeDiskLimit || strings.Contains(res.Stderr, "quota") {
		t.Errorf("printed ENOSPC on a disk with room: outcome %s, stderr %q; want no disk_limit and no quota note", res.Outcome, res.Stderr)
	}

	res = run(t, s, goruntime.Request{Command: "head -c 200M /dev/zero > big; sleep 3; rm big; exit 1"})
	if res.Outcome != goruntime.OutcomeDiskLimit || !strings.Contains(res.Stderr, "disk quota is full: 64 MiB") {
		t.Errorf("filled the disk for 3 s, then deleted the file: outcome %s, stderr %q; want disk_limit with the quota note", res.Outcome, res.Stderr)
	}

	res = run(t, s, goruntime.Request{Command: "head -c 200M /dev/zero > big"})
	if res.Outcome != goruntime.OutcomeDiskLimit || !strings.Contains(res.Stderr, "disk quota is full: 64 MiB") {
		t.Errorf("filled the disk: outcome %s, stderr %q; want disk_limit with the quota note", res.Outcome, res.Stderr)
	}
	mustOK(t, s, goruntime.Request{Command: "rm big"})
}
