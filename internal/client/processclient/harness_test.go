package processclient

import (
	"context"
	"log/slog"
	"testing"
	"time"

	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

// startServer serves the process API on loopback TCP with a fresh root
// (the real server the client talks to inside a sandbox).
func startServer(t *testing.T, cfg processapi.Config) (*processapi.Server, processv1.ProcessServiceClient) {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := processapi.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	conn, err := Dial(srv.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-srv.Done()
	})
	return srv, processv1.NewProcessServiceClient(conn)
}

// waitGone polls until pid has exited, failing after 10 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for procfs.Alive(pid, 0) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
