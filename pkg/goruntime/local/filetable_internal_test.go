package local

import (
	"strings"
	"testing"
)

func TestFileTableProblem(t *testing.T) {
	const gib = 1 << 30
	if p := fileTableProblem(gib, 9223372036854775807); p != nil {
		t.Errorf("systemd's fs.file-max: %+v; want no problem", p)
	}
	if p := fileTableProblem(gib, 0); p != nil {
		t.Errorf("unknown fs.file-max: %+v; want no problem", p)
	}
	// These machines without systemd: 2466112 files, and one 1 GiB
	// sandbox can map 2.8 million.
	p := fileTableProblem(gib, 2_466_112)
	if p == nil || !p.Required || p.Status != StatusUnavailable || !strings.Contains(p.Fix, "--setup-user=") || !strings.Contains(p.Fix, "Options.Relax.FileTable") {
		t.Fatalf("fs.file-max 2466112, 1 GiB: %+v; want a required, unavailable protection naming the setup (sandbox-check --setup-user) and Options.Relax.FileTable", p)
	}
	// The memory the fix names is small enough.
	if p := fileTableProblem(225<<20, 2_466_112); p != nil {
		t.Errorf("225 MiB on fs.file-max 2466112 (the fix's own figure): %+v; want no problem", p)
	}
}
