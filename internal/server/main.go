package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cloexec"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/sigdefault"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/sockets"
)

// Main runs the runtime server until ctx is done or the process gets
// SIGTERM or SIGINT, then kills running commands and shuts down. args are
// the command-line arguments after the program name (os.Args[1:]); each
// flag falls back to an environment variable read through getenv (see
// --help). Commands inherit the process environment (os.Environ(), with
// GOMAXPROCS from --command-gomaxprocs when set), but not the signals it
// was started with ignored: they start with every signal at its default
// disposition. Logs
// go to stderr as JSON lines; the first "listening" line carries the
// bound address. It returns the process exit code: 0 after a clean
// shutdown or --help, 2 for bad flags, 1 when the server cannot start.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return MainWith(ctx, args, stdout, stderr, getenv, nil)
}

// MainWith is Main with the sandboxd process API served by processAPI in
// this process (Config.ProcessAPI); nil: by the companion binary.
func MainWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, processAPI ProcessAPIFunc) int {
	fset := flag.NewFlagSet("sandbox-server", flag.ContinueOnError)
	fset.SetOutput(stderr)
	f := Defaults()
	RegisterFlags(fset, &f, func(k string) (string, bool) { v := getenv(k); return v, v != "" })
	fset.Usage = func() { usage(stdout, fset) }
	if code, ok := cliflags.ParseFlagsOnly(fset, args); !ok {
		return code
	}
	logw := capLog(stderr, f.LogMaxBytes)
	log := f.logger(logw)
	// What this process was started holding without close-on-exec stays
	// here: no command or companion inherits it (startHanding).
	if err := cloexec.Except(); err != nil {
		log.Error("sandbox-server: cannot keep inherited descriptors from commands", "err", err)
		return 1
	}
	cfg, ls, err := f.Validate(fset, getenv, log)
	if err != nil {
		log.Error("sandbox-server: bad setting", "err", err)
		return cliflags.ExitUsage
	}
	cfg.CompanionStderr = logw
	cfg.Environ = withEnv(os.Environ(), "GOMAXPROCS", f.CommandGOMAXPROCS)
	cfg.ProcessAPI = processAPI
	cfg.FileCalls = fileCalls(f.OSThreads)
	defaultSignalsForCommands(ctx, log)
	reserveOSThreads(f.OSThreads)
	return Serve(ctx, cfg, ls)
}

// defaultSignalsForCommands keeps the signals this process inherited as
// ignored (nohup, a supervisor, a shell's traps) from being passed on:
// commands start with every signal at its default disposition, while the
// process goes on ignoring them itself (internal/server/sigdefault).
func defaultSignalsForCommands(ctx context.Context, log *slog.Logger) {
	taken, left, err := sigdefault.ForChildren(ctx, log)
	if err != nil {
		log.Warn("sandbox-server: commands may start with signals ignored", "err", err)
		return
	}
	if len(taken) > 0 {
		log.Debug("signals inherited as ignored: still ignored here, at their default for commands", "signals", fmt.Sprint(taken))
	}
	if len(left) > 0 {
		// The C library's 32 and 33: harmless (package sigdefault).
		log.Debug("signals inherited as ignored that commands inherit too (Go cannot catch them)", "signals", fmt.Sprint(left))
	}
}

// Serve runs a runtime server for cfg on every listener ls names until ctx
// is done or the process gets SIGTERM or SIGINT (not with cfg.Init: then
// only ctx, or the end of cfg.Lifeline, which exits), then kills running
// commands and drains requests for ls.ShutdownTimeout. It returns the
// process exit code: 0 after a clean shutdown, 1 when the server cannot
// start or a listener fails.
func Serve(ctx context.Context, cfg Config, ls Listeners) int {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr, shutdownTimeout := ls.Addr, ls.ShutdownTimeout
	srv, err := New(cfg)
	if err != nil {
		log.Error("sandbox-server: cannot start", "err", err)
		return 1
	}
	defer srv.Close()
	ln, err := sockets.Listen(addr)
	if err != nil {
		log.Error("sandbox-server: cannot listen", "addr", addr, "err", err)
		return 1
	}

	ctx, stop, err := shutdownSignals(ctx, cfg, log)
	if err != nil {
		log.Error("sandbox-server: cannot run as the sandbox's init", "err", err)
		return 1
	}
	defer stop()
	if cfg.IdleExit > 0 {
		var stopIdle context.CancelCauseFunc
		ctx, stopIdle = context.WithCancelCause(ctx)
		defer stopIdle(nil)
		go watchIdle(ctx, srv.act, cfg.IdleExit, log, func() { stopIdle(errIdleExit) })
	}
	reapCtx, stopReap := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReap()
	go srv.Run(reapCtx)
	sbd, err := srv.startSandboxd(ctx, ls.GRPCAddr, ls.RESTAddr, log)
	if err != nil {
		log.Error("sandbox-server: cannot serve the sandboxd API", "err", err)
		return 1
	}
	if sbd != nil {
		defer sbd.Close()
	}
	if ls.ModuleRelayAddr != "" {
		relay, err := startModuleRelay(ctx, ls.ModuleRelayAddr, ls.ModuleRelaySocket, log)
		if err != nil {
			log.Error("sandbox-server: cannot serve the module relay", "err", err)
			return 1
		}
		defer relay.Close()
	}

	reqCtx, stopRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRequests(nil)
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().Network()+":"+ln.Addr().String(), "pid", os.Getpid(),
		"base_dir", cfg.BaseDir, "exec_timeout_s", cfg.ExecTimeout.Seconds(), "reap", cfg.Reap)

	select {
	case err := <-served:
		log.Error("sandbox-server: serve", "err", err)
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down: killing running commands", "cause", context.Cause(ctx))
	stopRequests(errShutdown)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown incomplete", "err", err)
		_ = hs.Close()
	}
	log.Info("stopped")
	return 0
}
