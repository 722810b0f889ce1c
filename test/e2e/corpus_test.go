//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/corpus"
)

// podCases are the corpus cases make e2e runs in pods: those whose
// outcome goes through what differs from the local backend (the SDK's
// and the router's transport of streams, large and non-UTF-8 output and
// stdin; exit codes, signals and timeouts ending processes in a pod; the
// request's env and args; uploads of nested modules; the image's
// toolchain and module cache; Go-aware results with their paths under
// /app). The rest exercise the Go toolchain on the same server code, and
// run in pods with E2E_FULL=1 (and against the local backend in make
// unit). signal_kill is here for the pod's init guard: its seccomp filter
// once refused kill(200, SIGKILL), so the case failed whenever its
// program landed on pid 200 (docs/e2e.md, "signal_kill in a runc pod").
var podCases = []string{
	"hello", "both_streams", "unicode_output", "large_output", "stdin_interactive",
	"env_vars", "os_args", "exit_code_binary", "exit_code_go_run", "panic_binary",
	"signal_kill", "timeout_kill", "stack_overflow", "missing_module", "replace_submodule",
	"embed", "compile_error", "goaware_type_error", "goaware_tests", "goaware_vet",
	"go_test_packages",
}

// testCorpus runs the conformance corpus (corpus.Run, as make unit does
// against the local backend) against agent-sandbox: each case on this
// host's go command and in two claimed pods of rt, compared; podCases
// by default, every case with E2E_FULL=1.
func testCorpus(t *testing.T, rt *runtimeTarget) {
	if rt == gvisorTarget && !fullMatrix() {
		t.Skip("the corpus runs under runc; under gVisor too with E2E_FULL=1 (make e2e-full)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	poolReady(ctx, t, rt, 2)
	b := newBackend(ctx, t, rt, modes[1])
	opts := corpus.RunOptions{Dir: filepath.Join(shared.repo, "pkg", "goruntime", "corpus", "testdata"), Sandboxes: 2, Cases: podCases}
	if fullMatrix() {
		opts.Cases = nil
	}
	sum := corpus.Run(t, b, opts)
	report(t, "corpus-"+rt.name, "corpus: %s on agent-sandbox (%s)", sum, rt.name)
}
