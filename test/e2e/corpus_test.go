//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/corpus"
)

// testCorpus runs the conformance corpus (corpus.Run, as make unit does
// against the local backend) against agent-sandbox: every case on this
// host's go command and in two claimed pods of rt, compared.
func testCorpus(t *testing.T, rt *runtimeTarget) {
	if rt == gvisorTarget && !fullMatrix() {
		t.Skip("the corpus runs under runc; under gVisor too with E2E_FULL=1 (make e2e-full)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 2)
	b := newBackend(ctx, t, rt, modes[1])
	sum := corpus.Run(t, b, corpus.RunOptions{Dir: filepath.Join(shared.repo, "pkg", "goruntime", "corpus", "testdata"), Sandboxes: 2})
	report(t, "corpus-"+rt.name, "corpus: %s on agent-sandbox (%s)", sum, rt.name)
}
