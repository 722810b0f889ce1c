package processapi

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cloexec"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/procevents"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/sigdefault"
)

// Main runs the process API as the companion binary
// (cmd/sandbox-processapi) until the process gets SIGTERM or SIGINT or ctx
// ends, then shuts down as Server.Close does. The runtime server starts it
// on the first connection to its --grpc-addr or --rest-addr and hands it
// those listeners as inherited file descriptors (--grpc-fd, --rest-fd) and
// a pipe for command events (--events-fd, see internal/server/procevents);
// run by hand, it opens --grpc-addr and --rest-addr itself. Commands
// inherit this process's environment, but start with every signal at its
// default disposition, whatever this process inherited ignored. Logs go to stderr as JSON lines. It
// returns the process exit code: 0 after a clean shutdown or --help, 2 for
// bad flags, 1 when it cannot start.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-processapi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		root               = fs.String("root-dir", "", "directory commands run in and file paths are relative to (required; created if missing)")
		grpcFD             = fs.Int("grpc-fd", -1, "inherited file descriptor of the ProcessService (gRPC) listener; -1: none")
		restFD             = fs.Int("rest-fd", -1, "inherited file descriptor of the REST listener; -1: none")
		eventsFD           = fs.Int("events-fd", -1, "inherited file descriptor to write command events to (the runtime server's metrics); -1: none")
		grpcAddr           = fs.String("grpc-addr", "", "serve ProcessService (gRPC) here when --grpc-fd is not given: host:port or unix:/path/to.sock")
		restAddr           = fs.String("rest-addr", "", "serve the REST API here when --rest-fd is not given: host:port or unix:/path/to.sock")
		logLevel           = fs.String("log-level", "info", "log level: debug, info, warn or error (JSON lines on stderr)")
		oomScoreAdj        = fs.String("oom-score-adj", "", "oom_score_adj to set on this process (and so on every command it starts) before serving; empty: leave it")
		shutdownTimeoutSec = fs.Float64("shutdown-timeout", DefaultShutdownTimeout.Seconds(), "seconds Close may take after SIGTERM: commands get SIGTERM, then SIGKILL after 2 s")
	)
	fs.Usage = func() {
		fmt.Fprint(stdout, `Usage: sandbox-processapi [flags]

The sandboxd process API of the runtime server (gRPC ProcessService, REST
/v1/files, /v1/health, /v1/metadata), in a binary of its own so that an
idle sandbox-server does not carry gRPC. sandbox-server starts it, from
next to its own executable or --process-api-bin, on the first connection
to --grpc-addr or --rest-addr and passes it the listeners; run by hand it
listens on --grpc-addr and --rest-addr. See docs/sandboxd.md.

`)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	if code, ok := cliflags.Parse(fs, args); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "sandbox-processapi: --log-level=%q: want debug, info, warn or error\n", *logLevel)
		return cliflags.ExitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "sandbox-processapi")
	if fs.NArg() > 0 || *root == "" || !(*shutdownTimeoutSec > 0) {
		log.Error("sandbox-processapi: bad flags: want --root-dir, a positive --shutdown-timeout and no arguments", "args", fs.Args())
		return cliflags.ExitUsage
	}
	// The listeners and the events pipe it was handed are used here only:
	// no command inherits them, or anything else this process was started
	// holding (every command start marks again: process.go).
	if err := cloexec.Except(); err != nil {
		log.Error("sandbox-processapi: cannot keep inherited descriptors from commands", "err", err)
		return 1
	}
	if *oomScoreAdj != "" {
		if _, err := strconv.Atoi(*oomScoreAdj); err != nil {
			log.Error("sandbox-processapi: --oom-score-adj: want an integer", "value", *oomScoreAdj)
			return cliflags.ExitUsage
		}
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte(*oomScoreAdj), 0o644); err != nil {
			log.Warn("set oom_score_adj", "err", err)
		}
	}
	// Not dumpable (after the write above, which needs /proc/self to stay
	// ours): commands, which run as this uid, cannot ptrace this process
	// or read its memory, and so cannot take over the API other commands'
	// output goes through. They can still kill it; the runtime server
	// starts a new one on the next connection. Commands are dumpable again
	// once they execve a binary they can read.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Error("sandbox-processapi: prctl(PR_SET_DUMPABLE, 0)", "err", err)
		return 1
	}
	cfg := Config{
		GRPCAddr: *grpcAddr, RESTAddr: *restAddr, RootDir: *root, Logger: log,
		ShutdownTimeout: secondsDuration(*shutdownTimeoutSec),
	}
	var err error
	if cfg.GRPCListener, err = inheritedListener(*grpcFD, "grpc"); err == nil {
		cfg.RESTListener, err = inheritedListener(*restFD, "rest")
	}
	if err != nil {
		log.Error("sandbox-processapi: cannot start", "err", err)
		return 1
	}
	if *eventsFD >= 0 {
		f := os.NewFile(uintptr(*eventsFD), "events")
		defer f.Close()
		cfg.Observer = procevents.NewWriter(f)
	}
	// Signals inherited as ignored stay ignored here but not for commands
	// (internal/server/sigdefault).
	taken, left, err := sigdefault.ForChildren(ctx, log)
	if err != nil {
		log.Warn("sandbox-processapi: commands may start with signals ignored", "err", err)
	} else if len(taken)+len(left) > 0 {
		// left: the C library's 32 and 33, harmless (package sigdefault).
		log.Debug("signals inherited as ignored: still ignored here, at their default for commands (but those left)", "taken", fmt.Sprint(taken), "left", fmt.Sprint(left))
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := Start(ctx, cfg)
	if err != nil {
		log.Error("sandbox-processapi: cannot start", "err", err)
		return 1
	}
	<-srv.Done()
	if err := srv.Close(); err != nil {
		log.Error("sandbox-processapi: serve", "err", err)
		return 1
	}
	return 0
}

// inheritedListener wraps inherited file descriptor fd (-1: none) as a
// listener.
func inheritedListener(fd int, name string) (net.Listener, error) {
	if fd < 0 {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, fmt.Errorf("--%s-fd=%d: not a file descriptor", name, fd)
	}
	defer f.Close() // FileListener holds a duplicate
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--%s-fd=%d: not a listening socket: %w", name, fd, err)
	}
	return l, nil
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
