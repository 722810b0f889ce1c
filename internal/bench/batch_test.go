package bench

import (
	"strings"
	"testing"
)

// TestBatchPrograms: the batch cycles through the usable corpus cases,
// every program is new code (a file of its own in the root package) and
// none is a slow case or one that waits out a timeout of its own.
func TestBatchPrograms(t *testing.T) {
	programs, mix, err := batchPrograms(200)
	if err != nil {
		t.Fatal(err)
	}
	if len(programs) != 200 || !strings.Contains(mix, "cases of") {
		t.Fatalf("%d programs, mix %q", len(programs), mix)
	}
	seen := map[string]bool{}
	cases := map[string]bool{}
	for i, p := range programs {
		if p.Slow {
			t.Errorf("program %d: case %s is slow", i, p.Name)
		}
		cases[p.Name] = true
		last := p.Files[len(p.Files)-1]
		pkg, _ := rootPackage(p.Case)
		if last.Path != "zz_batch_program.go" || !strings.HasPrefix(string(last.Data), "package "+pkg+"\n") {
			t.Fatalf("program %d (%s): last file %s %q, root package %q", i, p.Name, last.Path, last.Data, pkg)
		}
		if seen[string(last.Data)] {
			t.Fatalf("program %d: %q twice", i, last.Data)
		}
		seen[string(last.Data)] = true
	}
	if len(cases) < 20 {
		t.Fatalf("only %d distinct cases in the mix: %v", len(cases), cases)
	}
	for _, name := range []string{"timeout_kill"} {
		if cases[name] {
			t.Errorf("case %s waits out its own timeout; it is not a program of the batch", name)
		}
	}
}
