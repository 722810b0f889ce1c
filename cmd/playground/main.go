// Command playground serves a web playground for Go: one page editing a
// module (txtar, shown as file tabs) with Run, Test, Check, Format and
// Share, each call in the browser session's own sandbox on the local
// backend (default) or agent-sandbox (--backend). It prints its URL on
// stdout; logs go to stderr. docs/playground.md describes the page, the
// API and the safety rules.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/backendflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/playground"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	local.ServeIfChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("playground", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := playground.Defaults()
	var (
		addr        = fs.String("addr", "127.0.0.1:8090", "serve the page and its API on this address")
		shareDir    = fs.String("share-dir", defaultShareDir(), "directory of shared texts (one file per link, content-addressed)")
		logLevel    = fs.String("log-level", "info", "debug, info, warn or error (logs go to stderr)")
		tokenFile   = fs.String("auth-token-file", "", "require \"Authorization: Bearer <token>\" on the API with the token in this file (the page asks for it once per tab); empty: no auth")
		tokensFile  = fs.String("auth-tokens-file", "", "named principals, a file of name:token lines (as mcp-server's): each name's sandboxes count against its share (--max-sandboxes-per-principal)")
		maxShareKiB = fs.Int64("max-share-kb", cfg.MaxShareBytes>>10, "largest shared text, KiB (413 past it)")
		maxStoreMiB = fs.Int64("max-share-store-mb", cfg.MaxShareStoreBytes>>20, "most MiB all shared texts in --share-dir hold together (507 past it for a new text)")
		maxReqKiB   = fs.Int64("max-request-kb", cfg.MaxRequestBytes>>10, "largest API request, KiB (413 past it)")
	)
	fs.DurationVar(&cfg.OpenTimeout, "open-timeout", cfg.OpenTimeout, "how long to wait for a sandbox to start")
	fs.DurationVar(&cfg.RunTimeout, "timeout", cfg.RunTimeout, "a Run's or Test's time limit (each step's for Check and Format)")
	fs.DurationVar(&cfg.IdleTTL, "idle-ttl", cfg.IdleTTL, "close a browser session's sandbox after this long without a call; its next call opens a fresh one (0: never)")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", cfg.SessionTTL, "forget a browser session after this long without a request (the page must then be reloaded); at least --idle-ttl")
	fs.IntVar(&cfg.MaxSandboxes, "max-sandboxes", cfg.MaxSandboxes, "most sandboxes open at once; past it a call is refused until others end (0: no bound)")
	fs.IntVar(&cfg.MaxPerPrincipal, "max-sandboxes-per-principal", cfg.MaxPerPrincipal, "most sandboxes one principal holds at once (an auth token's name; without auth, a client address) (0: no bound)")
	fs.IntVar(&cfg.MaxBrowserSessions, "max-browser-sessions", cfg.MaxBrowserSessions, "most browser sessions remembered at once; past it a new page load gets 503")
	fs.IntVar(&cfg.SharesPerMinute, "shares-per-minute", cfg.SharesPerMinute, "most shares one principal makes a minute (429 past it)")
	fs.IntVar(&cfg.MaxFiles, "max-files", cfg.MaxFiles, "most files in one module")
	fs.IntVar(&cfg.HTTP.MaxConns, "max-connections", cfg.HTTP.MaxConns, "most connections held at once; more wait in the listen queue")
	fs.Func("allowed-origin", "a browser origin (scheme://host[:port]) allowed to call the API besides the server's own when that is an IP address or localhost; repeatable (serving under a DNS name: give its origin here)", func(v string) error {
		cfg.HTTP.AllowedOrigins = append(cfg.HTTP.AllowedOrigins, v)
		return nil
	})
	bf := backendflag.Register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: playground [flags]\n\nServes the Go playground's page and API on --addr; each browser session gets its own sandbox.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "playground: --log-level=%q: want debug, info, warn or error\n", *logLevel)
		return cliflags.ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.ShareDir = *shareDir
	cfg.MaxShareBytes = *maxShareKiB << 10
	cfg.MaxShareStoreBytes = *maxStoreMiB << 20
	cfg.MaxRequestBytes = *maxReqKiB << 10
	cfg.Logger = log
	// nil: the playground reads its token from a file only (the MCP
	// server's environment variable is not its).
	if err := cfg.HTTP.ReadAuth(*tokenFile, *tokensFile, nil); err != nil {
		fmt.Fprintf(stderr, "playground: %v\n", err)
		return cliflags.ExitUsage
	}
	// Every value check but the backend's, before a backend is built.
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "playground: %v\n", err)
		return cliflags.ExitUsage
	}

	backend, err := bf.New(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "playground: %v\n", err)
		return 1
	}
	defer backendflag.CloseOnExit(ctx, backend, log)
	cfg.Backend = backend
	srv, err := playground.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "playground: %v\n", err)
		return cliflags.ExitUsage
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "playground: --addr=%s: %v\n", *addr, err)
		return 1
	}
	if cfg.HTTP.Unguarded(ln.Addr()) {
		log.Warn(mcphttp.UnguardedWarning, "addr", ln.Addr().String())
	}
	hs := mcphttp.NewServer(srv.Handler(), cfg.HTTP)
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	go srv.Run(bg)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(mcphttp.Listen(ln, cfg.HTTP)) }()
	fmt.Fprintf(stdout, "playground: http://%s/ (backend %s)\n", ln.Addr(), backend.Name())
	log.Info("serving the playground", "url", "http://"+ln.Addr().String()+"/", "backend", backend.Name())

	code := 0
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("http server", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	stopBG()
	if err := srv.Close(sctx); err != nil {
		log.Error("close sandboxes", "err", err)
		code = 1
	}
	return code
}

// defaultShareDir is under the user's cache directory.
func defaultShareDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "go-runtime-sandbox", "playground-shares")
}
