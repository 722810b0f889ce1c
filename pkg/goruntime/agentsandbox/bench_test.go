package agentsandbox

import (
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// BenchmarkOpenClose measures the backend's own cost of a claim: the
// preflight checks, the SDK's create/resolve/wait against fake clientsets,
// and the delete. A real cluster adds the API server and controller.
func BenchmarkOpenClose(b *testing.B) {
	c := newCluster(b, clusterSetup{pool: true, template: true})
	be := newBackend(b, c, newRouter(b), nil)
	ctx := b.Context()
	for b.Loop() {
		sb, err := be.Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExec measures one Exec with Env and Timeout (the shell wrapper
// and coreutils timeout) through the SDK to a real runtime server.
func BenchmarkExec(b *testing.B) {
	c := newCluster(b, clusterSetup{pool: true, template: true})
	be := newBackend(b, c, newRouter(b), nil)
	ctx := b.Context()
	sb, err := be.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	req := goruntime.ExecRequest{Command: "echo $X", Env: map[string]string{"X": "y"}, Timeout: 10 * time.Second}
	for b.Loop() {
		if _, err := sb.Exec(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
