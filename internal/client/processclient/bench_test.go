package processclient

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
	"google.golang.org/grpc"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// BenchmarkExecTrue: one `/bin/sh -c true` over ProcessService.Start on a
// unix socket, as the local backend runs it (without bubblewrap).
func BenchmarkExecTrue(b *testing.B) {
	dir := b.TempDir()
	srv, err := processapi.Start(context.Background(), processapi.Config{RootDir: dir, GRPCAddr: "unix:" + filepath.Join(dir, "g.sock"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	conn, err := Dial(srv.GRPCAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := newClient(conn)
	ctx := context.Background()
	for b.Loop() {
		res, err := Exec(ctx, client, goruntime.ExecRequest{Command: "true"}, ExecOptions{}, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkFirstChunk reports how long after the call the first output
// chunk of a command that keeps running arrives (first-chunk-ms).
func BenchmarkFirstChunk(b *testing.B) {
	dir := b.TempDir()
	srv, err := processapi.Start(context.Background(), processapi.Config{RootDir: dir, GRPCAddr: "unix:" + filepath.Join(dir, "g.sock"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	conn, err := Dial(srv.GRPCAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := newClient(conn)
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		var first time.Duration
		_, err := Exec(context.Background(), client, goruntime.ExecRequest{Command: "echo x; sleep 0.05"}, ExecOptions{},
			func(goruntime.Chunk) {
				if first == 0 {
					first = time.Since(start)
				}
			})
		if err != nil || first == 0 {
			b.Fatalf("%v, first chunk %v", err, first)
		}
		total += first
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "first-chunk-ms")
}

func newClient(conn grpc.ClientConnInterface) processv1.ProcessServiceClient {
	return processv1.NewProcessServiceClient(conn)
}
