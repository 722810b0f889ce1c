package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

// setting is one flag with its environment fallback.
type setting struct {
	flag, env, def, usage string
}

// settings lists every flag; each falls back to its environment variable,
// then to its default.
func settingsTable() []setting {
	return []setting{
		{"addr", "SANDBOX_ADDR", ":8888", "address to listen on: host:port, or unix:/path/to.sock for a unix socket"},
		{"base-dir", "SANDBOX_BASE_DIR", "/app", "directory commands run in and file paths are relative to (created if missing)"},
		{"exec-timeout", "SANDBOX_EXEC_TIMEOUT_SECONDS", "300", "seconds a command may run before its process group is killed (exit code 124); an invalid value falls back to 300 with a warning"},
		{"max-output-bytes", "SANDBOX_MAX_OUTPUT_BYTES", strconv.Itoa(8 << 20), "each output stream's share of an /execute response, in JSON-encoded bytes including the truncation marker (minimum 2048)"},
		{"max-upload-bytes", "SANDBOX_MAX_UPLOAD_BYTES", strconv.Itoa(256 << 20), "largest file /upload accepts; larger gets 413"},
		{"max-command-bytes", "SANDBOX_MAX_COMMAND_BYTES", strconv.Itoa(16 << 20), "largest /execute request body; larger gets 413"},
		{"home", "SANDBOX_HOME", "", "HOME for commands when the server's own HOME is unset or not writable (default $TMPDIR/sandbox-home); GOPATH, GOMODCACHE and GOCACHE derive from HOME when unset or not writable"},
		{"reap", "SANDBOX_REAP", "true", "reap orphaned processes: as PID 1, or else as a child subreaper (PR_SET_CHILD_SUBREAPER)"},
		{"shutdown-timeout", "SANDBOX_SHUTDOWN_TIMEOUT_SECONDS", "10", "seconds to wait for in-flight requests after SIGTERM (running commands are killed at once)"},
		{"log-level", "SANDBOX_LOG_LEVEL", "info", "log level: debug, info, warn or error (JSON lines on stderr)"},
		{"grpc-addr", processapi.EnvGRPCAddr, "", "also serve the sandboxd ProcessService (gRPC) here: host:port or unix:/path/to.sock; empty: off (docs/sandboxd.md)"},
		{"rest-addr", processapi.EnvRESTAddr, "", "also serve the sandboxd REST API (/v1/files, /v1/health, /v1/metadata) here: host:port or unix:/path/to.sock; empty: off"},
	}
}

// Main runs the runtime server until ctx is done or the process gets
// SIGTERM or SIGINT, then kills running commands and shuts down. args are
// the command-line arguments after the program name (os.Args[1:]); each
// flag falls back to an environment variable read through getenv (see
// --help). Commands inherit the process environment (os.Environ()). Logs
// go to stderr as JSON lines; the first "listening" line carries the
// bound address. It returns the process exit code: 0 after a clean
// shutdown or --help, 2 for bad flags, 1 when the server cannot start.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fset := flag.NewFlagSet("sandbox-server", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() { usage(stdout) }
	vals := make(map[string]*string, len(settingsTable()))
	for _, st := range settingsTable() {
		vals[st.flag] = fset.String(st.flag, st.def, st.usage)
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "sandbox-server: unexpected arguments: %q\n", fset.Args())
		return 2
	}
	given := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { given[f.Name] = true })
	raw := func(name string) (string, string) { // value, where it came from
		for _, st := range settingsTable() {
			if st.flag != name {
				continue
			}
			if given[name] {
				return *vals[name], "--" + name
			}
			if v := getenv(st.env); v != "" {
				return v, st.env
			}
			return st.def, "default"
		}
		panic("runtimeserver: unknown setting " + name)
	}

	levelStr, _ := raw("log-level")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelStr)); err != nil {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := level.UnmarshalText([]byte(levelStr)); err != nil {
		log.Warn("invalid log level; using info", "value", levelStr)
	}

	cfg, err := configFrom(raw, getenv, log)
	if err != nil {
		log.Error("sandbox-server: bad setting", "err", err)
		return 2
	}
	addr, _ := raw("addr")
	shutdownTimeout := secondsSetting(raw, "shutdown-timeout", log)

	srv, err := New(cfg)
	if err != nil {
		log.Error("sandbox-server: cannot start", "err", err)
		return 1
	}
	defer srv.Close()
	ln, err := listen(addr)
	if err != nil {
		log.Error("sandbox-server: cannot listen", "addr", addr, "err", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	reapCtx, stopReap := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReap()
	go srv.Run(reapCtx)
	grpcAddr, _ := raw("grpc-addr")
	restAddr, _ := raw("rest-addr")
	sbd, err := srv.startSandboxd(ctx, grpcAddr, restAddr, log)
	if err != nil {
		log.Error("sandbox-server: cannot serve the sandboxd API", "err", err)
		return 1
	}
	if sbd != nil {
		defer sbd.Close()
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

// configFrom builds a Config from the settings' raw values.
func configFrom(raw func(string) (string, string), getenv func(string) string, log *slog.Logger) (Config, error) {
	cfg := Config{Environ: os.Environ(), Log: log}
	cfg.BaseDir, _ = raw("base-dir")
	cfg.ExecTimeout = secondsSetting(raw, "exec-timeout", log)
	sizes := []struct {
		name string
		dst  func(int64)
		min  int64
	}{
		{"max-output-bytes", func(v int64) { cfg.MaxOutputBytes = int(v) }, 2 * streamReserve},
		{"max-upload-bytes", func(v int64) { cfg.MaxUploadBytes = v }, 1},
		{"max-command-bytes", func(v int64) { cfg.MaxCommandBytes = v }, 1},
	}
	for _, sz := range sizes {
		v, from := raw(sz.name)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < sz.min || n > math.MaxInt32*int64(64) {
			return cfg, fmt.Errorf("%s=%q (from %s): want an integer number of bytes >= %d", sz.name, v, from, sz.min)
		}
		sz.dst(n)
	}
	reap, from := raw("reap")
	b, err := strconv.ParseBool(reap)
	if err != nil {
		return cfg, fmt.Errorf("reap=%q (from %s): want true or false", reap, from)
	}
	cfg.Reap = b
	cfg.FallbackHome, _ = raw("home")
	if cfg.FallbackHome == "" {
		tmp := getenv("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		cfg.FallbackHome = filepath.Join(tmp, "sandbox-home")
	}
	return cfg, nil
}

// secondsSetting parses a positive, finite number of seconds, falling back
// to the setting's default with a warning, as upstream does for
// SANDBOX_EXEC_TIMEOUT_SECONDS.
func secondsSetting(raw func(string) (string, string), name string, log *slog.Logger) time.Duration {
	v, from := raw(name)
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || f > maxTimeout.Seconds() {
		var def string
		for _, st := range settingsTable() {
			if st.flag == name {
				def = st.def
			}
		}
		log.Warn("invalid setting; using default", "setting", name, "from", from, "value", v, "default", def)
		f, _ = strconv.ParseFloat(def, 64)
	}
	return time.Duration(f * float64(time.Second))
}

// listen opens addr: "unix:/path" for a unix socket (a stale socket file
// is removed first), otherwise a TCP host:port.
func listen(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			_ = os.Remove(p)
		}
		return net.Listen("unix", p)
	}
	return net.Listen("tcp", addr)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: sandbox-server [flags]

The runtime server inside a sandbox: agent-sandbox's runtime contract
(GET /, POST /execute, POST /upload, GET /download/{path}, GET /list/{path},
GET /exists/{path}) with this project's /execute extensions. Commands run
with /bin/sh -c in the base directory, each in its own process group.
See docs/sandbox-server.md.

Each flag falls back to its environment variable, then to its default.

`)
	for _, st := range settingsTable() {
		def := st.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s (env %s, default %s)\n      %s\n", st.flag, st.env, def, st.usage)
	}
}
