package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Flags is every setting of the sandbox-server process, one typed field a
// flag. Each flag's default is its environment variable's value when that
// is set and not empty, else the value in Defaults. Validate turns Flags
// into a Config and the listeners' addresses.
type Flags struct {
	Addr            string  // --addr, SANDBOX_ADDR: host:port or unix:/path
	BaseDir         string  // --base-dir, SANDBOX_BASE_DIR
	ExecTimeout     Seconds // --exec-timeout, SANDBOX_EXEC_TIMEOUT_SECONDS
	MaxOutputBytes  int64   // --max-output-bytes, SANDBOX_MAX_OUTPUT_BYTES
	MaxUploadBytes  int64   // --max-upload-bytes, SANDBOX_MAX_UPLOAD_BYTES
	MaxCommandBytes int64   // --max-command-bytes, SANDBOX_MAX_COMMAND_BYTES
	Home            string  // --home, SANDBOX_HOME; empty: $TMPDIR/sandbox-home
	Reap            bool    // --reap, SANDBOX_REAP
	ShutdownTimeout Seconds // --shutdown-timeout, SANDBOX_SHUTDOWN_TIMEOUT_SECONDS
	LogLevel        string  // --log-level, SANDBOX_LOG_LEVEL
	LogMaxBytes     int64   // --log-max-bytes, SANDBOX_LOG_MAX_BYTES
	GRPCAddr        string  // --grpc-addr, SANDBOXD_GRPC_ADDR; empty: off
	RESTAddr        string  // --rest-addr, SANDBOXD_REST_ADDR; empty: off
	// ProcessAPIBin is --process-api-bin, SANDBOX_PROCESS_API_BIN: the
	// companion serving --grpc-addr/--rest-addr (sandboxd.go); empty:
	// sandbox-processapi next to this executable.
	ProcessAPIBin string
	// ModuleRelayAddr and ModuleRelaySocket: --module-relay-addr,
	// SANDBOX_MODULE_RELAY_ADDR (a loopback host:port) and
	// --module-relay-socket, SANDBOX_MODULE_RELAY_SOCKET (the host module
	// proxy's unix socket); both or neither (off). See modrelay.go.
	ModuleRelayAddr   string
	ModuleRelaySocket string
	// OSThreads is --os-threads, SANDBOX_OS_THREADS: OS threads the Go
	// runtime starts before the server listens and keeps (threads.go).
	OSThreads int64
	// CommandGOMAXPROCS is --command-gomaxprocs,
	// SANDBOX_COMMAND_GOMAXPROCS: GOMAXPROCS in the environment of
	// commands and the process API companion; 0: as in the server's own
	// environment. It lets the server run with GOMAXPROCS=1 (its own
	// work is a few requests at a time; each P costs ~0.15 MiB resident)
	// while commands get the sandbox's CPUs.
	CommandGOMAXPROCS int64
	// Init is --init, SANDBOX_INIT: run as a sandbox's init (Config.Init).
	Init bool
	// InitGuard is --init-guard, SANDBOX_INIT_GUARD (Config.InitGuard).
	InitGuard bool
	// LifelineFD is --lifeline-fd, SANDBOX_LIFELINE_FD: the descriptor of
	// the lifeline pipe (Config.Lifeline); -1: none.
	LifelineFD int64
	// IdleExitSeconds is --idle-exit, SANDBOX_IDLE_EXIT_SECONDS: stop once
	// idle this long (Config.IdleExit); 0: never.
	IdleExitSeconds int64
	// GoTelemetry is --go-telemetry, SANDBOX_GO_TELEMETRY: the go
	// command's telemetry mode for commands (Config.GoTelemetry).
	GoTelemetry string

	// envErrs holds environment values that did not parse, reported by
	// Validate with the variable's name.
	envErrs []error
}

// Seconds is a positive, finite number of seconds given as a flag. A value
// that is not one does not fail the flag: Validate warns and uses the
// default instead, as upstream does for SANDBOX_EXEC_TIMEOUT_SECONDS.
type Seconds struct {
	D       time.Duration
	def     time.Duration
	bad     string // the raw value that did not parse, if any
	badFrom string // where it came from
	name    string
}

func (s *Seconds) String() string {
	if s == nil {
		return ""
	}
	return strconv.FormatFloat(s.D.Seconds(), 'g', -1, 64)
}

// Set parses v; an invalid value is kept for Validate's warning.
func (s *Seconds) Set(v string) error {
	s.setFrom(v, "--"+s.name)
	return nil
}

func (s *Seconds) setFrom(v, from string) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || f > maxTimeout.Seconds() {
		s.bad, s.badFrom, s.D = v, from, s.def
		return
	}
	// Rounded: 0.3 s is 300 ms, not 299.999999 ms (Args round-trips).
	s.bad, s.D = "", time.Duration(math.Round(f*float64(time.Second)))
}

// Defaults returns the built-in value of every setting.
func Defaults() Flags {
	return Flags{
		Addr:            ":8888",
		BaseDir:         "/app",
		ExecTimeout:     Seconds{D: 300 * time.Second},
		MaxOutputBytes:  8 << 20,
		MaxUploadBytes:  256 << 20,
		MaxCommandBytes: 16 << 20,
		Reap:            true,
		ShutdownTimeout: Seconds{D: 10 * time.Second},
		LogLevel:        "info",
		LogMaxBytes:     8 << 20,
		OSThreads:       16,
		LifelineFD:      -1,
	}
}

// RegisterFlags registers one flag per field of f on fs, each defaulting
// to lookupEnv(its variable) when that is set and not empty, else to f's
// current value. The usage text of each flag names its variable.
func RegisterFlags(fs *flag.FlagSet, f *Flags, lookupEnv func(string) (string, bool)) {
	env := func(name string) (string, bool) {
		v, ok := lookupEnv(name)
		return v, ok && v != ""
	}
	str := func(p *string, name, envName, usage string) {
		if v, ok := env(envName); ok {
			*p = v
		}
		fs.StringVar(p, name, *p, usage+envNote(envName))
	}
	integer := func(p *int64, name, envName, unit, usage string) {
		if v, ok := env(envName); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q (from %s): want an integer number of %s", name, v, envName, unit))
			} else {
				*p = n
			}
		}
		fs.Int64Var(p, name, *p, usage+envNote(envName))
	}
	bytes := func(p *int64, name, envName, usage string) { integer(p, name, envName, "bytes", usage) }
	secs := func(s *Seconds, name, envName, usage string) {
		s.name, s.def = name, s.D
		if v, ok := env(envName); ok {
			s.setFrom(v, envName)
		}
		fs.Var(s, name, usage+envNote(envName))
	}
	str(&f.Addr, "addr", "SANDBOX_ADDR", "address to listen on: host:port, or unix:/path/to.sock for a unix socket")
	str(&f.BaseDir, "base-dir", "SANDBOX_BASE_DIR", "directory commands run in and file paths are relative to (created if missing)")
	secs(&f.ExecTimeout, "exec-timeout", "SANDBOX_EXEC_TIMEOUT_SECONDS", "seconds a command may run before its process group is killed (exit code 124); an invalid value falls back to 300 with a warning")
	bytes(&f.MaxOutputBytes, "max-output-bytes", "SANDBOX_MAX_OUTPUT_BYTES", "each output stream's share of an /execute response, in JSON-encoded bytes including the truncation marker (minimum 2048)")
	bytes(&f.MaxUploadBytes, "max-upload-bytes", "SANDBOX_MAX_UPLOAD_BYTES", "largest file /upload accepts, and most file content one /unpack archive carries; larger gets 413")
	bytes(&f.MaxCommandBytes, "max-command-bytes", "SANDBOX_MAX_COMMAND_BYTES", "largest /execute request body; larger gets 413")
	str(&f.Home, "home", "SANDBOX_HOME", "HOME for commands when the server's own HOME is unset or not writable (default $TMPDIR/sandbox-home); GOPATH, GOMODCACHE and GOCACHE derive from HOME when unset or not writable")
	boolEnv := func(p *bool, name, envName string) {
		if v, ok := env(envName); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q (from %s): want true or false", name, v, envName))
			} else {
				*p = b
			}
		}
	}
	boolEnv(&f.Reap, "reap", "SANDBOX_REAP")
	fs.Var((*strictBool)(&f.Reap), "reap", "reap orphaned processes: as PID 1, or else as a child subreaper (PR_SET_CHILD_SUBREAPER)"+envNote("SANDBOX_REAP"))
	secs(&f.ShutdownTimeout, "shutdown-timeout", "SANDBOX_SHUTDOWN_TIMEOUT_SECONDS", "seconds to wait for in-flight requests after SIGTERM (running commands are killed at once)")
	str(&f.LogLevel, "log-level", "SANDBOX_LOG_LEVEL", "log level: debug, info, warn or error (JSON lines on stderr)")
	bytes(&f.LogMaxBytes, "log-max-bytes", "SANDBOX_LOG_MAX_BYTES", "when stderr is a regular file: empty it each time it grows past this many bytes, keeping the latest lines (commands decide how much the server logs; a file that only grows would fill the disk it is on); 0: no cap")
	str(&f.GRPCAddr, "grpc-addr", "SANDBOXD_GRPC_ADDR", "also serve the sandboxd ProcessService (gRPC) here: host:port or unix:/path/to.sock; empty: off. The server listens; the "+ProcessAPIName+" companion serves, started on the first connection (docs/sandboxd.md)")
	str(&f.RESTAddr, "rest-addr", "SANDBOXD_REST_ADDR", "also serve the sandboxd REST API (/v1/files, /v1/health, /v1/metadata) here: host:port or unix:/path/to.sock; empty: off. Served by the companion, as --grpc-addr")
	str(&f.ProcessAPIBin, "process-api-bin", "SANDBOX_PROCESS_API_BIN", "the "+ProcessAPIName+" binary that serves --grpc-addr and --rest-addr (default: next to this executable); the server refuses to start with either set and the binary missing")
	str(&f.ModuleRelayAddr, "module-relay-addr", "SANDBOX_MODULE_RELAY_ADDR", "relay Go module proxy requests (GOPROXY=http://this) from this loopback address (127.0.0.1:port) to --module-relay-socket; empty: off")
	integer(&f.OSThreads, "os-threads", "SANDBOX_OS_THREADS", "threads", "OS threads to start before listening and keep, so that commands filling the sandbox's task limit (a pids cgroup counts threads) cannot stop the server from getting one; 0: none")
	integer(&f.CommandGOMAXPROCS, "command-gomaxprocs", "SANDBOX_COMMAND_GOMAXPROCS", "processors", "GOMAXPROCS in the environment of commands and the "+ProcessAPIName+" companion, so that the server itself can run with GOMAXPROCS=1 (less memory) while commands get the sandbox's CPUs; 0: as in this process's environment")
	str(&f.ModuleRelaySocket, "module-relay-socket", "SANDBOX_MODULE_RELAY_SOCKET", "unix socket of the host's Go module proxy that --module-relay-addr relays to")
	boolEnv(&f.Init, "init", "SANDBOX_INIT")
	boolEnv(&f.InitGuard, "init-guard", "SANDBOX_INIT_GUARD")
	fs.BoolVar(&f.Init, "init", f.Init, "run as the init (PID 1) of a sandbox's pid namespace whose commands share the server's uid: hold and drop every signal a command could send (SIGTERM and SIGINT no longer shut the server down; only SIGKILL from outside the namespace ends it) and make the process not dumpable (no ptrace, /proc/1/mem or /proc/1/environ for commands)"+envNote("SANDBOX_INIT"))
	integer(&f.IdleExitSeconds, "idle-exit", "SANDBOX_IDLE_EXIT_SECONDS", "seconds", "stop once no request or command has been in flight for this many seconds (as the sandbox's init, ending the sandbox): a sandbox left behind by its owner ends on its own; GET /metrics does not count as use; 0: never")
	fs.BoolVar(&f.InitGuard, "init-guard", f.InitGuard, "with --init, as PID 1 only: also refuse, for every command, SIGKILL and SIGSTOP aimed at PID 1 (kill, tkill, tgkill, sigqueue, F_SETSIG), joining PID 1's process group, and pidfd_send_signal (ENOSYS: programs fall back to kill). The kernel drops those for a pid namespace's init; gVisor does not (a command's kill -9 1 ends it). A pod's runtime container sets it (manifests/base); refused when the filter cannot be loaded"+envNote("SANDBOX_INIT_GUARD"))
	str(&f.GoTelemetry, "go-telemetry", "SANDBOX_GO_TELEMETRY", "the go command's telemetry mode for commands (off, local or on), written where `go telemetry` writes it under the commands' HOME unless a mode is there already (GOTELEMETRY in the environment does not set it); empty: the go command's own (local: counters written under HOME)")
	integer(&f.LifelineFD, "lifeline-fd", "SANDBOX_LIFELINE_FD", "descriptors", "read end of a pipe held open by the sandbox's owner: when it reaches EOF the server exits at once (as PID 1, ending every process of the sandbox); the line \"detach\" stops the watch; -1: none")
}

// strictBool is a bool flag that takes its value as a separate argument
// too (--reap false), as the server's flags always have.
type strictBool bool

func (b *strictBool) String() string { return strconv.FormatBool(bool(*b)) }

func (b *strictBool) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*b = strictBool(x)
	return nil
}

// envNote is the suffix of a flag's usage naming its variable; usage and
// the --help test read the variable back from it.
func envNote(name string) string { return " (env " + name + ")" }

// Listeners says where Serve listens and how long it drains on shutdown.
type Listeners struct {
	Addr     string // the runtime contract: host:port or unix:/path
	GRPCAddr string // the sandboxd ProcessService; empty: off
	RESTAddr string // the sandboxd REST API; empty: off
	// ModuleRelayAddr (loopback host:port) relays to the unix socket
	// ModuleRelaySocket; both empty: off.
	ModuleRelayAddr, ModuleRelaySocket string
	ShutdownTimeout                    time.Duration
}

// Validate checks f and returns the Config and Listeners it describes, logging to log
// (a level from LogLevel, warnings for timeouts that fell back to their
// default). getenv supplies TMPDIR for the default fallback HOME. Errors
// name the setting and where its value came from.
func (f *Flags) Validate(fs *flag.FlagSet, getenv func(string) string, log *slog.Logger) (Config, Listeners, error) {
	if err := errors.Join(f.envErrs...); err != nil {
		return Config{}, Listeners{}, err
	}
	for _, s := range []*Seconds{&f.ExecTimeout, &f.ShutdownTimeout} {
		if s.bad != "" {
			log.Warn("invalid setting; using default", "setting", s.name, "from", s.badFrom, "value", s.bad, "default", s.def.Seconds())
		}
	}
	from := func(name string) string {
		given := false
		fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
		if given {
			return "--" + name
		}
		return "environment or default"
	}
	for _, sz := range []struct {
		name string
		v    int64
		min  int64
	}{
		{"max-output-bytes", f.MaxOutputBytes, 2 * streamReserve},
		{"max-upload-bytes", f.MaxUploadBytes, 1},
		{"max-command-bytes", f.MaxCommandBytes, 1},
	} {
		if sz.v < sz.min || sz.v > math.MaxInt32*int64(64) {
			return Config{}, Listeners{}, fmt.Errorf("%s=%d (from %s): want an integer number of bytes >= %d", sz.name, sz.v, from(sz.name), sz.min)
		}
	}
	if f.OSThreads < 0 || f.OSThreads > maxOSThreads {
		return Config{}, Listeners{}, fmt.Errorf("os-threads=%d (from %s): want 0 to %d", f.OSThreads, from("os-threads"), maxOSThreads)
	}
	if f.CommandGOMAXPROCS < 0 || f.CommandGOMAXPROCS > maxCommandGOMAXPROCS {
		return Config{}, Listeners{}, fmt.Errorf("command-gomaxprocs=%d (from %s): want 0 to %d", f.CommandGOMAXPROCS, from("command-gomaxprocs"), maxCommandGOMAXPROCS)
	}
	if f.LifelineFD < -1 || f.LifelineFD > math.MaxInt32 {
		return Config{}, Listeners{}, fmt.Errorf("lifeline-fd=%d (from %s): want a descriptor number, or -1 for none", f.LifelineFD, from("lifeline-fd"))
	}
	switch f.GoTelemetry {
	case "", "off", "local", "on":
	default:
		return Config{}, Listeners{}, fmt.Errorf("go-telemetry=%q (from %s): want off, local, on or empty", f.GoTelemetry, from("go-telemetry"))
	}
	if f.IdleExitSeconds < 0 || f.IdleExitSeconds > math.MaxInt32 {
		return Config{}, Listeners{}, fmt.Errorf("idle-exit=%d (from %s): want a number of seconds, or 0 for never", f.IdleExitSeconds, from("idle-exit"))
	}
	if f.InitGuard && !f.Init {
		return Config{}, Listeners{}, fmt.Errorf("init-guard (from %s): only with --init", from("init-guard"))
	}
	var lifeline *os.File
	if f.LifelineFD >= 0 {
		var err error
		if lifeline, err = openLifeline(int(f.LifelineFD)); err != nil {
			return Config{}, Listeners{}, fmt.Errorf("%w (from %s)", err, from("lifeline-fd"))
		}
	}
	cfg := Config{
		Init:            f.Init,
		InitGuard:       f.InitGuard,
		Lifeline:        lifeline,
		BaseDir:         f.BaseDir,
		ExecTimeout:     f.ExecTimeout.D,
		MaxOutputBytes:  int(f.MaxOutputBytes),
		MaxUploadBytes:  f.MaxUploadBytes,
		MaxCommandBytes: f.MaxCommandBytes,
		FallbackHome:    f.Home,
		Reap:            f.Reap,
		Log:             log,
		LogLevel:        f.level().String(),
		ProcessAPIBin:   f.ProcessAPIBin,
		IdleExit:        time.Duration(f.IdleExitSeconds) * time.Second,
		GoTelemetry:     f.GoTelemetry,
	}
	if cfg.FallbackHome == "" {
		tmp := getenv("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		cfg.FallbackHome = filepath.Join(tmp, "sandbox-home")
	}
	if (f.ModuleRelayAddr == "") != (f.ModuleRelaySocket == "") {
		return Config{}, Listeners{}, fmt.Errorf("module-relay-addr=%q (from %s) and module-relay-socket=%q (from %s): give both or neither",
			f.ModuleRelayAddr, from("module-relay-addr"), f.ModuleRelaySocket, from("module-relay-socket"))
	}
	if f.ModuleRelayAddr != "" {
		if err := checkRelayAddr(f.ModuleRelayAddr); err != nil {
			return Config{}, Listeners{}, fmt.Errorf("module-relay-addr=%q (from %s): %w", f.ModuleRelayAddr, from("module-relay-addr"), err)
		}
	}
	ls := Listeners{Addr: f.Addr, GRPCAddr: f.GRPCAddr, RESTAddr: f.RESTAddr, ShutdownTimeout: f.ShutdownTimeout.D,
		ModuleRelayAddr: f.ModuleRelayAddr, ModuleRelaySocket: f.ModuleRelaySocket}
	return cfg, ls, nil
}

// level is f.LogLevel, or info when it is not a level.
func (f *Flags) level() slog.Level {
	var level slog.Level
	if level.UnmarshalText([]byte(f.LogLevel)) != nil {
		return slog.LevelInfo
	}
	return level
}

// logger returns the JSON logger at f.LogLevel (info, with a warning, when
// the level is not one).
func (f *Flags) logger(w io.Writer) *slog.Logger {
	var probe slog.Level
	bad := probe.UnmarshalText([]byte(f.LogLevel)) != nil
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: f.level()}))
	if bad {
		log.Warn("invalid log level; using info", "value", f.LogLevel)
	}
	return log
}

// usage prints --help: what the server is, then every flag of fs with its
// variable and default.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, `Usage: sandbox-server [flags]

The runtime server inside a sandbox: agent-sandbox's runtime contract
(GET /, POST /execute, POST /upload, GET /download/{path}, GET /list/{path},
GET /exists/{path}) with this project's /execute extensions. Commands run
with /bin/sh -c in the base directory, each in its own process group.
See docs/sandbox-server.md.

Each flag falls back to its environment variable, then to its default.

`)
	fs.VisitAll(func(fl *flag.Flag) {
		text, envName, _ := strings.Cut(fl.Usage, " (env ")
		envName = strings.TrimSuffix(envName, ")")
		def := fl.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s (env %s, default %s)\n      %s\n", fl.Name, envName, def, text)
	})
}
