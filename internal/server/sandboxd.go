package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi/apiconfig"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/procevents"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/sockets"
)

// ProcessAPIName is the file name of the process API companion
// (cmd/sandbox-processapi), looked up next to the server's executable.
const ProcessAPIName = "sandbox-processapi"

// ProcessAPIFunc serves the sandboxd process API inside this process (for
// a program that links gRPC anyway, such as one re-executed by the local
// backend as the server) as c says: processapi.Serve. The server fills
// c's addresses, RootDir (Config.BaseDir), Env, Logger, Observer (its
// metrics) and Children (its reaper, when it reaps); the returned Closer
// shuts the API down. See Config.ProcessAPI.
type ProcessAPIFunc func(ctx context.Context, c apiconfig.Config) (io.Closer, error)

// startSandboxd serves the sandboxd hybrid API (docs/sandboxd.md) next to
// the legacy contract when grpcAddr or restAddr is set; it returns nil,
// nil when both are empty. With Config.ProcessAPI set it serves in this
// process; otherwise it opens the listeners here and the companion binary
// serves them (processAPIHost). Errors: an address that cannot be served,
// or a companion that cannot be found (naming --process-api-bin).
func (s *Server) startSandboxd(ctx context.Context, grpcAddr, restAddr string, log *slog.Logger) (io.Closer, error) {
	if grpcAddr == "" && restAddr == "" {
		return nil, nil
	}
	if s.cfg.ProcessAPI != nil {
		c := apiconfig.Config{GRPCAddr: grpcAddr, RESTAddr: restAddr, RootDir: s.cfg.BaseDir, Env: envMap(s.env), Logger: log, Observer: s.mets}
		if s.reap != nil { // a nil *reaper in the interface would not be nil
			c.Children = s.reap
		}
		return s.cfg.ProcessAPI(ctx, c)
	}
	bin, err := findProcessAPI(s.cfg.ProcessAPIBin)
	if err != nil {
		return nil, err
	}
	h := &processAPIHost{
		bin: bin, env: s.env, procs: s.procs, mets: s.mets, log: log, stderr: s.cfg.CompanionStderr, companion: &s.companion,
		args: []string{"--root-dir", s.cfg.BaseDir, "--oom-score-adj", strconv.Itoa(commandOOMScoreAdj)},
	}
	if s.cfg.LogLevel != "" {
		h.args = append(h.args, "--log-level", s.cfg.LogLevel)
	}
	for _, a := range []struct{ addr, flag string }{{grpcAddr, "--grpc-fd"}, {restAddr, "--rest-fd"}} {
		if a.addr == "" {
			continue
		}
		ln, err := sockets.Listen(a.addr)
		if err != nil {
			h.closeListeners()
			return nil, fmt.Errorf("sandboxd %s: %w", strings.TrimSuffix(strings.TrimPrefix(a.flag, "--"), "-fd"), err)
		}
		if err := h.add(ln, a.flag, a.flag == "--rest-fd"); err != nil {
			_ = ln.Close()
			h.closeListeners()
			return nil, err
		}
	}
	if err := h.start(ctx); err != nil {
		h.closeListeners()
		return nil, err
	}
	log.Info("sandboxd listening", "grpc", grpcAddr, "rest", restAddr, "companion", bin,
		"note", "the companion starts on the first connection")
	return h, nil
}

// envMap is environ ("k=v" entries) as a map; a later entry wins.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// findProcessAPI returns the companion binary: bin when set, else
// ProcessAPIName next to this executable. Errors name the fix.
func findProcessAPI(bin string) (string, error) {
	from := "--process-api-bin/SANDBOX_PROCESS_API_BIN"
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("process API companion: cannot locate this executable (%v): set --process-api-bin or SANDBOX_PROCESS_API_BIN to the %s binary", err, ProcessAPIName)
		}
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		bin, from = filepath.Join(filepath.Dir(exe), ProcessAPIName), "next to "+exe
	}
	fi, err := os.Stat(bin)
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
		err = errors.New("not an executable file")
	}
	if err != nil {
		return "", fmt.Errorf("process API companion %s (%s): %w; --grpc-addr/--rest-addr need it: build cmd/%s into the server's directory, or set --process-api-bin or SANDBOX_PROCESS_API_BIN",
			bin, from, err, ProcessAPIName)
	}
	return bin, nil
}

// observeProcessEvents replays the command events procevents.Read gets
// from r into the metrics; it returns when r ends.
func (m *metrics) observeProcessEvents(r io.Reader, log *slog.Logger) {
	if err := procevents.Read(r, m); err != nil {
		log.Warn("read process API events", "err", err)
	}
}

// listenerFile is a listener the server owns and a duplicate of its file
// descriptor that the companion inherits.
type listenerFile struct {
	ln   net.Listener
	file *os.File
	flag string // the companion's flag naming its descriptor
	rest bool   // HTTP: refused connections get a 503 naming the error
}

func (h *processAPIHost) add(ln net.Listener, flag string, rest bool) error {
	fl, ok := ln.(interface{ File() (*os.File, error) })
	if !ok {
		return fmt.Errorf("sandboxd listener %s: no file descriptor", ln.Addr())
	}
	f, err := fl.File()
	if err != nil {
		return fmt.Errorf("sandboxd listener %s: %w", ln.Addr(), err)
	}
	h.lns = append(h.lns, listenerFile{ln: ln, file: f, flag: flag, rest: rest})
	return nil
}

func (h *processAPIHost) closeListeners() {
	for _, l := range h.lns {
		_ = l.file.Close()
		_ = l.ln.Close()
	}
}

// Starting holds off reaping passes until the returned func records pid
// as a child that its starter waits for (0: nothing was started). It lets
// code that starts children with cmd.Start itself (sandboxd's upstream
// ProcessServer, when Config.ProcessAPI serves it in this process) share
// the process with the reaper.
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
