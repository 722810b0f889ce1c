package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

// startSandboxd serves the sandboxd hybrid API (internal/server/processapi) next to
// the legacy contract when grpcAddr or restAddr is set, with the same base
// directory and command environment; it returns nil, nil when both are
// empty. It stops when ctx ends or its Close is called.
func (s *Server) startSandboxd(ctx context.Context, grpcAddr, restAddr string, log *slog.Logger) (*processapi.Server, error) {
	if grpcAddr == "" && restAddr == "" {
		return nil, nil
	}
	env := make(map[string]string, len(s.env))
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cfg := processapi.Config{
		GRPCAddr: grpcAddr,
		RESTAddr: restAddr,
		RootDir:  s.cfg.BaseDir,
		Env:      env,
		Logger:   log,
		Observer: s.mets,
	}
	if s.reap != nil {
		cfg.Children = s.reap
	}
	return processapi.Start(ctx, cfg)
}

// Starting holds off reaping passes until the returned func records pid
// as a child that its starter waits for (0: nothing was started). It lets
// code that starts children with cmd.Start itself (sandboxd's upstream
// ProcessServer) share the process with the reaper.
func (r *reaper) Starting() func(pid int) {
	r.startMu.RLock()
	var once sync.Once
	return func(pid int) {
		once.Do(func() {
			if pid > 0 {
				oomFirst(pid)
				r.mu.Lock()
				r.tracked[pid] = struct{}{}
				r.mu.Unlock()
			}
			r.startMu.RUnlock()
		})
	}
}

// Exited forgets pid once its starter has waited for it.
func (r *reaper) Exited(pid int) { r.Done(pid) }
