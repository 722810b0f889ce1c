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

// BenchmarkSessionFiles measures one Session.Execute that ships two small
// files and runs `true`, against a real runtime server: "unpack" sends the
// files in one request to its /unpack (in-cluster-pod-ip), "tar" uploads
// an archive and runs tar on it (the router route, which has no /unpack).
// Compare the two side by side (benchstat); docs/kubernetes.md has a run.
func BenchmarkSessionFiles(b *testing.B) {
	c := newCluster(b, clusterSetup{pool: true, template: true})
	files := []goruntime.File{{Path: "go.mod", Data: []byte("module m\n")}, {Path: "main.go", Data: []byte("package main\n\nfunc main() {}\n")}}
	for _, bc := range []struct{ name, conn string }{{"unpack", ConnectivityInClusterPodIP}, {"tar", ConnectivityRouter}} {
		b.Run(bc.name, func(b *testing.B) {
			be := newBackend(b, c, newRouter(b), func(o *Options) { o.Connectivity = bc.conn })
			ctx := b.Context()
			sb, err := be.Open(ctx)
			if err != nil {
				b.Fatal(err)
			}
			sess := goruntime.NewSession(sb, goruntime.Options{})
			for b.Loop() {
				if res, err := sess.Execute(ctx, goruntime.Request{Files: files, Command: "true"}); err != nil || res.ExitCode != 0 {
					b.Fatal(err, res)
				}
			}
		})
	}
}
