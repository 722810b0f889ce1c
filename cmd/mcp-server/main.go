// Command mcp-server serves go-runtime-sandbox to MCP clients (Claude
// Code, Cursor, Gemini CLI, ...): the tool run_go_code builds, runs and
// tests Go code in an isolated sandbox, beside check_go_code, read_file,
// list_files and reset_sandbox. docs/mcp.md shows how to configure clients.
//
// Over stdio (the default) one sandbox serves the whole process; with
// --http=ADDR each MCP session over Streamable HTTP gets its own. A
// sandbox made with create_sandbox outlives both, named by its
// sandbox_id; --http --stateless serves without sessions (MCP
// 2026-07-28).
// Logs go to stderr; over stdio, stdout carries protocol frames only.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/backendflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	local.ServeIfChild()
	// Over stdio, stdout belongs to the protocol: anything else that writes
	// to os.Stdout (a stray print, a library) goes to stderr instead.
	protocol := os.Stdout
	os.Stdout = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, protocol, os.Stderr)
	stop()
	os.Exit(code)
}

// version is the main module's version from the build info ("dev" for a
// build from a work tree).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func run(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := mcpserver.Defaults()
	cfg.RegisterFlags(fs)
	var (
		httpAddr    = fs.String("http", "", "serve Streamable HTTP on this address (e.g. 127.0.0.1:8931) instead of stdio; one sandbox per MCP session")
		logLevel    = fs.String("log-level", "info", "debug, info, warn or error (logs go to stderr)")
		showVersion = fs.Bool("version", false, "print the version and exit")
		metricsAddr = fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464): tool calls by tool and outcome, call duration, sandboxes open, open latency; and the probes GET /healthz (the process serves) and GET /readyz (200 while it takes calls, 503 once it is shutting down); empty: off")
		tokenFile   = fs.String("auth-token-file", "", "http: require \"Authorization: Bearer <token>\" with the token in this file (default: $"+mcphttp.TokenEnv+" if set; else no auth); its principal is named \""+mcphttp.DefaultPrincipal+"\"")
		tokensFile  = fs.String("auth-tokens-file", "", "http: named principals, a file of name:token lines (# comments; tokens of 16 bytes or more): a request's principal is the name of its token, and the sandboxes it creates (create_sandbox) are that principal's alone; every sandbox, its MCP sessions' too, counts against its share (--max-sandboxes-per-principal); with --auth-token-file, both are accepted")
	)
	bf := backendflag.Register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mcp-server [flags]\n\nServes the MCP tools run_go_code, check_go_code, read_file, list_files and reset_sandbox over stdio (default) or Streamable HTTP (--http), each in this session's own sandbox or, given sandbox_id, in a sandbox of the caller's made by create_sandbox (listed by list_sandboxes, ended by delete_sandbox or after its idle TTL). snapshot_sandbox saves a sandbox's files, fork_sandbox copies a sandbox N ways, restore_sandbox rolls one back, create_sandbox from_snapshot starts one from a snapshot (list_snapshots, delete_snapshot). --http --stateless serves without sessions (MCP 2026-07-28), so replicas can share the load.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	if *showVersion {
		fmt.Fprintln(stderr, "mcp-server", version())
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "mcp-server: --log-level=%q: want debug, info, warn or error\n", *logLevel)
		return cliflags.ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg.Logger = log
	cfg.Version = version()
	if *httpAddr != "" {
		if err := cfg.HTTP.ReadAuth(*tokenFile, *tokensFile, os.LookupEnv); err != nil {
			fmt.Fprintf(stderr, "mcp-server: %v\n", err)
			return cliflags.ExitUsage
		}
	}
	if err := checkFlags(cfg, *httpAddr); err != nil {
		fmt.Fprintf(stderr, "mcp-server: %v\n", err)
		return cliflags.ExitUsage
	}

	backend, err := bf.New(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-server: %v\n", err)
		return 1
	}
	cfg.Backend = backend
	// Over stdio, open the sandbox as the server starts when that is cheap:
	// the local backend hands out one of its warm pool's sandboxes.
	cfg.OpenAtStart = backend.Name() == backendflag.Local
	defer backendflag.CloseOnExit(ctx, backend, log)
	srv, err := mcpserver.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-server: %v\n", err)
		return cliflags.ExitUsage
	}

	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "mcp-server: --metrics-addr=%s: %v\n", *metricsAddr, err)
			return 1
		}
		stopMetrics := serveMetrics(mln, srv.MetricsHandler(), func() bool { return ctx.Err() == nil }, log)
		defer stopMetrics()
		log.Info("serving metrics", "url", "http://"+mln.Addr().String()+"/metrics")
	}

	if *httpAddr == "" {
		log.Info("serving MCP over stdio", "backend", backend.Name(), "version", version())
		if err := srv.ServeStdio(ctx, stdin, stdout); err != nil {
			// A bad --claim ends here before serving: say so plainly.
			fmt.Fprintf(stderr, "mcp-server: %v\n", bf.Explain(err))
			return 1
		}
		return 0
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-server: --http=%s: %v\n", *httpAddr, err)
		return 1
	}
	if cfg.HTTP.Unguarded(ln.Addr()) {
		log.Warn(mcphttp.UnguardedWarning, "addr", ln.Addr().String())
	}
	if err := srv.ServeHTTP(ctx, ln); err != nil {
		log.Error("http server", "err", err)
		return 1
	}
	return 0
}

// checkFlags refuses flag combinations that cannot work, before any
// backend is built: --claim and --persistent are stdio-only; every value
// check is cfg.Validate's.
func checkFlags(cfg mcpserver.Config, httpAddr string) error {
	switch {
	case httpAddr != "" && cfg.Claim != "":
		return fmt.Errorf("--claim works over stdio only: with --http each MCP session gets its own sandbox")
	case httpAddr != "" && cfg.Persistent:
		return fmt.Errorf("--persistent works over stdio only: HTTP sandboxes end with their MCP session (create_sandbox makes one that outlives it)")
	case httpAddr == "" && cfg.Stateless:
		return fmt.Errorf("--stateless works over HTTP only (--http): over stdio one client holds one session")
	}
	return cfg.Validate()
}

// serveMetrics serves h at /metrics on ln until the returned func is
// called, beside the probes a Deployment points at: /healthz answers 200
// while the process serves; /readyz answers 200 while ready() (the server
// takes calls) and 503 after, so a replica that is shutting down leaves
// its Service's endpoints before its listener closes.
func serveMetrics(ln net.Listener, h http.Handler, ready func() bool, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("metrics server", "err", err)
		}
	}()
	return func() { _ = hs.Close() }
}
