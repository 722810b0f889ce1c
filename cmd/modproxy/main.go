// Command modproxy serves the Go module proxy protocol (GOPROXY) for the
// modules an allowlist names, fetching what its module cache lacks with its
// own go command: pkg/goruntime/modproxy, the proxy the local backend runs
// for sandboxes without a network (--allow-modules), as a server of its
// own. On Kubernetes it runs in the runtime image as the Deployment and
// Service of manifests/modproxy, and the sandbox pods' GOPROXY points at it
// (manifests/overlays/modproxy), their egress allowed to it alone
// (docs/kubernetes.md, "Modules on demand").
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
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/modproxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// Setting is how a refusal names the setting to change: the pattern to add
// to this server's --allow-modules.
const Setting = "%s (modproxy --allow-modules, manifests/modproxy)"

// config is run's configuration (flags; registerFlags reads the go
// command's own environment variables for their defaults).
type config struct {
	Addr       string
	Allow      string // comma-separated patterns
	ModCache   string // GOMODCACHE the proxy serves from and fills
	Go         string
	Upstream   string // the go command's GOPROXY
	SumDB      string // the go command's GOSUMDB
	NoSumDB    string // the go command's GONOSUMDB
	Work       string // the go command's working directory
	DownloadMB int64
	Grace      time.Duration
}

func defaults() config {
	return config{
		Addr:       ":8080",
		Go:         "go",
		Upstream:   "https://proxy.golang.org",
		SumDB:      "sum.golang.org",
		DownloadMB: modproxy.DefaultMaxDownloadBytes >> 20,
		Grace:      10 * time.Second,
	}
}

func registerFlags(fs *flag.FlagSet, c *config, lookupEnv func(string) (string, bool)) {
	env := func(k, def string) string {
		if v, ok := lookupEnv(k); ok && v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.Addr, "addr", c.Addr, "serve HTTP on this address; GET /healthz answers 200 while it serves")
	fs.StringVar(&c.Allow, "allow-modules", env("MODPROXY_ALLOW_MODULES", c.Allow), "module path patterns, comma-separated (as GOPRIVATE: a glob per path element, e.g. github.com/foo/*,golang.org/x/text), that clients may download; a request for any other module gets 404 naming the pattern to add ($MODPROXY_ALLOW_MODULES; required)")
	fs.StringVar(&c.ModCache, "mod-cache", env("GOMODCACHE", c.ModCache), "the module cache served from and filled by the go command ($GOMODCACHE; required)")
	fs.StringVar(&c.Go, "go", c.Go, "the go command that fetches modules (a path, or a name looked up on $PATH)")
	fs.StringVar(&c.Upstream, "upstream", env("GOPROXY", c.Upstream), "GOPROXY of the go command that fetches (e.g. https://proxy.golang.org, or file:///dir for modules from a directory; $GOPROXY)")
	fs.StringVar(&c.SumDB, "sumdb", env("GOSUMDB", c.SumDB), "GOSUMDB of the go command that fetches: downloads are verified against it ($GOSUMDB)")
	fs.StringVar(&c.NoSumDB, "nosumdb", env("GONOSUMDB", c.NoSumDB), "GONOSUMDB of the go command that fetches: module patterns not checked against --sumdb, e.g. private ones ($GONOSUMDB)")
	fs.StringVar(&c.Work, "work-dir", c.Work, "working directory of the go command, outside any module (default: a new temporary directory)")
	fs.Int64Var(&c.DownloadMB, "module-download-mb", c.DownloadMB, "the most the go command adds to --mod-cache while this process runs, MiB; past it, versions not yet in the cache are refused")
	fs.DurationVar(&c.Grace, "shutdown-grace", c.Grace, "on SIGTERM, how long requests in flight may still take")
}

// patterns splits --allow-modules.
func (c config) patterns() []string {
	var ps []string
	for p := range strings.SplitSeq(c.Allow, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

func (c config) validate() error {
	var errs []error
	if len(c.patterns()) == 0 {
		errs = append(errs, errors.New("--allow-modules is empty: name the module patterns clients may download (a proxy that refuses everything is of no use)"))
	} else if err := modproxy.ValidatePatterns(c.patterns()); err != nil {
		errs = append(errs, fmt.Errorf("--allow-modules=%q: %w", c.Allow, err))
	}
	if c.ModCache == "" {
		errs = append(errs, errors.New("--mod-cache is empty (and $GOMODCACHE unset)"))
	} else if !filepath.IsAbs(c.ModCache) {
		errs = append(errs, fmt.Errorf("--mod-cache=%q: must be an absolute path", c.ModCache))
	}
	if c.Upstream == "" || c.Upstream == "off" {
		errs = append(errs, fmt.Errorf("--upstream=%q: the go command needs a GOPROXY to fetch from", c.Upstream))
	}
	if c.DownloadMB <= 0 {
		errs = append(errs, fmt.Errorf("--module-download-mb=%d: must be positive", c.DownloadMB))
	}
	if c.Grace < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace=%v: must not be negative", c.Grace))
	}
	return errors.Join(errs...)
}

const usage = `usage: modproxy --allow-modules=PATTERNS [flags]

Serves the Go module proxy protocol (set GOPROXY=http://HOST:PORT in the
clients) for the modules PATTERNS allow, from --mod-cache, fetching a
missing version with the go command (its GOPROXY --upstream, checked
against --sumdb). A module outside the list gets 404 with a message the
client's go command prints:

  module example.com/other is not in this sandbox's module allowlist (allowed: golang.org/x/text).
  To let sandboxes download it, add a pattern: example.com/other (modproxy --allow-modules, manifests/modproxy)

Exits 0 after SIGTERM or SIGINT once requests in flight are done, 1 when it
cannot serve, 2 for bad flags.

Example (manifests/modproxy runs it so):
  modproxy --addr=:8080 --allow-modules=golang.org/x/*,rsc.io/quote --mod-cache=/cache/mod

flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("modproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	cfg := defaults()
	registerFlags(fs, &cfg, lookupEnv)
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return cliflags.ExitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	goCmd, err := exec.LookPath(cfg.Go)
	if err != nil {
		fmt.Fprintf(stderr, "modproxy: --go=%s: %v\n", cfg.Go, err)
		return 1
	}
	work := cfg.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "modproxy-"); err != nil {
			fmt.Fprintf(stderr, "modproxy: work directory: %v\n", err)
			return 1
		}
		defer os.RemoveAll(work)
	}
	if err := os.MkdirAll(cfg.ModCache, 0o755); err != nil {
		fmt.Fprintf(stderr, "modproxy: --mod-cache: %v\n", err)
		return 1
	}
	p, err := modproxy.New(modproxy.Config{
		Allow:            cfg.patterns(),
		ModCache:         cfg.ModCache,
		Source:           modproxy.GoCommand{Go: goCmd, Env: goEnv(cfg, lookupEnv), Dir: work},
		Setting:          Setting,
		MaxDownloadBytes: cfg.DownloadMB << 20,
		BudgetSetting:    "modproxy --module-download-mb",
		Logger:           log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return cliflags.ExitUsage
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "modproxy: serving %s for %s on %s\n", cfg.ModCache, strings.Join(cfg.patterns(), ","), ln.Addr())
	if err := serve(ctx, ln, handler(p), cfg.Grace); err != nil {
		fmt.Fprintf(stderr, "modproxy: %v\n", err)
		return 1
	}
	return 0
}

// goEnv is the fetching go command's whole environment: this process's,
// without the variables that would change where and how it fetches, and
// then those, from cfg.
func goEnv(cfg config, lookupEnv func(string) (string, bool)) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOCACHE", "GOPATH", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := lookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "GOMODCACHE="+cfg.ModCache, "GOPROXY="+cfg.Upstream, "GOSUMDB="+cfg.SumDB, "GONOSUMDB="+cfg.NoSumDB,
		"GOFLAGS=-modcacherw", "GOTOOLCHAIN=local", "GOWORK=off", "GO111MODULE=on", "GOENV=off")
}

// handler serves /healthz and, for every other path, the proxy; each
// client (its address without the port: a pod) gets its own share of the
// fetch slots.
func handler(p *modproxy.Proxy) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		p.ServeHTTP(w, r.WithContext(modproxy.WithClient(r.Context(), host)))
	}))
	return mux
}

// serve serves h on ln until ctx ends, then lets requests in flight finish
// within grace.
func serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
