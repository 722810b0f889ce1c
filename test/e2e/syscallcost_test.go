//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// syscallCostScript times, with bash builtins only (nothing to build, the
// same userland work in every place), what a first `go build` does
// thousands of times: a stat(2) of a file in GOROOT ([ -e ], less an
// empty loop of the same length) and a fork+exec of a small program
// (/bin/true). Under gVisor each crosses into the sentry (systrap) and a
// stat of the image's root file system also to the host (directfs), so
// set against runc's these say how much of gVisor's first `go run` is its
// per-system-call cost rather than anything a mount or cache setting
// changes.
const syscallCostScript = `
n=5000 m=50 f=$(go env GOROOT)/VERSION
t0=$(date +%s%N); for ((i=0;i<n;i++)); do :; done
t1=$(date +%s%N); for ((i=0;i<n;i++)); do [ -e "$f" ]; done
t2=$(date +%s%N); for ((i=0;i<m;i++)); do /bin/true; done
t3=$(date +%s%N)
echo "stat_ns $(( (t2-t1-(t1-t0))/n ))"
echo "exec_us $(( (t3-t2)/m/1000 ))"
`

// reportSyscallCosts runs syscallCostScript in sb and reports its figures
// for place.
func reportSyscallCosts(ctx context.Context, t *testing.T, place string, sb goruntime.Sandbox) {
	t.Helper()
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "bash -c '" + strings.ReplaceAll(syscallCostScript, "'", `'\''`) + "'", Timeout: 2 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("syscall costs (%s): %v %+v", place, err, res)
		return
	}
	got, err := keyValues(res.Stdout)
	if err != nil {
		t.Errorf("syscall costs (%s): %v", place, err)
		return
	}
	stat, sok := got["stat_ns"]
	exec, eok := got["exec_us"]
	if !sok || !eok {
		t.Errorf("syscall costs (%s): output %q", place, res.Stdout)
		return
	}
	report(t, "syscall-costs-"+place, "syscall costs (%s, bash builtins): stat of a GOROOT file %.1f µs, fork+exec of /bin/true %.2f ms",
		place, float64(stat)/1000, float64(exec)/1000)
}
