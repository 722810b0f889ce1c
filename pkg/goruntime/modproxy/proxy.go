package modproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
	"golang.org/x/mod/semver"
)

// Config configures a Proxy. The zero value of each optional field gives
// the default documented on it.
type Config struct {
	// Allow lists the module path patterns served (see ValidatePatterns).
	// Empty: every request is refused.
	Allow []string

	// ModCache is the host module cache (GOMODCACHE). Files are served from
	// its cache/download directory, which Source fills. Required.
	ModCache string

	// Source fetches what the cache lacks. Required (GoCommand is the
	// one this project uses).
	Source Source

	// Setting is how refusals tell a user to add a pattern: a format
	// with one %s, the pattern. Default "%s", the pattern alone.
	Setting string

	// FetchTimeout bounds one fetch by Source, including the wait for a
	// free fetch slot. Default DefaultFetchTimeout.
	FetchTimeout time.Duration

	// MaxFetches bounds the fetches running at once; more wait for a slot
	// within FetchTimeout. Default DefaultMaxFetches.
	MaxFetches int

	// MaxFetchesPerClient bounds the fetches one client (WithClient) has
	// running at once, so that no sandbox can hold every slot; more wait
	// within FetchTimeout. Default DefaultMaxFetchesPerClient.
	MaxFetchesPerClient int

	// MaxFileBytes bounds the size of a file served; a larger one gets
	// 404. Default DefaultMaxFileBytes (the go command's own limit on a
	// module zip).
	MaxFileBytes int64

	// MaxDownloadBytes bounds what the proxy's downloads add to ModCache
	// over its life (zips and the trees extracted from them); past it, a
	// version not in the cache is refused (404), cached ones are still
	// served (budget.go). Default DefaultMaxDownloadBytes.
	MaxDownloadBytes int64

	// BudgetSetting is how a refusal past MaxDownloadBytes names the
	// setting that raises it. Default "Config.MaxDownloadBytes".
	BudgetSetting string

	// Logger receives a line per fetch and per refusal, each at most
	// ratelog.OutsideBurst a minute (then one line counting the rest: a
	// sandbox can ask as fast as it likes); nil means slog.Default().
	Logger *slog.Logger
}

// Defaults, see Config.
const (
	DefaultFetchTimeout = 2 * time.Minute
	DefaultMaxFetches   = 2
	// DefaultMaxFetchesPerClient leaves a slot free for another sandbox
	// while one fetches.
	DefaultMaxFetchesPerClient = 1
	DefaultMaxFileBytes        = 500 << 20
	DefaultMaxDownloadBytes    = 2 << 30

	// maxPathBytes bounds a request's path: module paths are short.
	maxPathBytes = 1024
)

// Source fetches modules into the host module cache. Its errors reach the
// sandbox's go command as the text of a 404.
type Source interface {
	// Download puts mod@version's .info, .mod and .zip into
	// ModCache/cache/download. version is canonical semver.
	Download(ctx context.Context, mod, version string) error
	// Versions lists mod's tagged versions (the @v/list body), retracted
	// ones included, as a proxy lists them.
	Versions(ctx context.Context, mod string) ([]string, error)
	// Query resolves a version query ("latest", a branch, a commit, a
	// version prefix) to a version and its time.
	Query(ctx context.Context, mod, query string) (Info, error)
}

// Info is the body of a .info or @latest response.
type Info struct {
	Version string
	Time    time.Time
}

// Proxy is an http.Handler serving the GOPROXY protocol for the modules
// its Config allows. It is safe for concurrent use.
type Proxy struct {
	cfg     Config
	slots   chan struct{}
	clients clientSlots
	budget  *budget
	// refusals and fetches log through budgets of their own
	// (ratelog.Outside), so a flood of one does not silence the other.
	refusals, fetches *slog.Logger
}

// New checks cfg and returns its Proxy.
func New(cfg Config) (*Proxy, error) {
	if err := ValidatePatterns(cfg.Allow); err != nil {
		return nil, err
	}
	if cfg.ModCache == "" || cfg.Source == nil {
		return nil, errors.New("module proxy: Config.ModCache and Config.Source are required")
	}
	if cfg.Setting != "" && strings.Count(cfg.Setting, "%s") != 1 {
		return nil, fmt.Errorf("module proxy: Config.Setting %q: want one %%s", cfg.Setting)
	}
	if cfg.Setting == "" {
		cfg.Setting = "%s"
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.MaxFetches <= 0 {
		cfg.MaxFetches = DefaultMaxFetches
	}
	if cfg.MaxFetchesPerClient <= 0 {
		cfg.MaxFetchesPerClient = DefaultMaxFetchesPerClient
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.MaxDownloadBytes <= 0 {
		cfg.MaxDownloadBytes = DefaultMaxDownloadBytes
	}
	if cfg.BudgetSetting == "" {
		cfg.BudgetSetting = "Config.MaxDownloadBytes"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Proxy{cfg: cfg, slots: make(chan struct{}, cfg.MaxFetches), clients: clientSlots{per: cfg.MaxFetchesPerClient},
		budget:   &budget{max: cfg.MaxDownloadBytes, setting: cfg.BudgetSetting},
		refusals: ratelog.Outside(log), fetches: ratelog.Outside(log)}, nil
}

// ServeHTTP answers one GOPROXY request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		textError(w, http.StatusMethodNotAllowed, "module proxy: only GET and HEAD")
		return
	}
	req, err := parseRequest(r.URL.Path)
	if err != nil {
		textError(w, http.StatusBadRequest, "module proxy: bad request: "+err.Error())
		return
	}
	if !Allowed(p.cfg.Allow, req.mod) {
		p.refusals.InfoContext(r.Context(), "module proxy: refused", "module", req.mod, "suggest", SuggestPattern(req.mod))
		textError(w, http.StatusNotFound, p.refusal(req.mod))
		return
	}
	switch req.kind {
	case kindList:
		p.serveList(w, r, req)
	case kindLatest:
		p.serveQuery(w, r, req.mod, "latest")
	case kindInfo:
		if !isCanonical(req.version) {
			p.serveQuery(w, r, req.mod, req.version)
			return
		}
		p.serveFile(w, r, req)
	default:
		p.serveFile(w, r, req)
	}
}

// refusal is the text the sandbox's go command prints for a module
// outside the allowlist: at most 8 short lines, as it shows no more.
func (p *Proxy) refusal(mod string) string {
	now := "none"
	if len(p.cfg.Allow) > 0 {
		now = strings.Join(p.cfg.Allow, ",")
	}
	return fmt.Sprintf("module %s is not in this sandbox's module allowlist (allowed: %s).\n"+
		"To let sandboxes download it, add a pattern: %s\n"+
		"(patterns are path globs per element, as in GOPRIVATE; each allows a path and everything under it)",
		mod, now, fmt.Sprintf(p.cfg.Setting, SuggestPattern(mod)))
}

// serveList answers <module>/@v/list from Source.
func (p *Proxy) serveList(w http.ResponseWriter, r *http.Request, req request) {
	var versions []string
	err := p.fetch(r.Context(), req.mod, "list", func(ctx context.Context) (err error) {
		versions, err = p.cfg.Source.Versions(ctx, req.mod)
		return err
	})
	if err != nil {
		textError(w, http.StatusNotFound, err.Error())
		return
	}
	var b strings.Builder
	for _, v := range versions {
		if semver.IsValid(v) {
			b.WriteString(v + "\n")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// serveQuery answers @latest and .info for a version query from Source.
func (p *Proxy) serveQuery(w http.ResponseWriter, r *http.Request, mod, query string) {
	var info Info
	err := p.fetch(r.Context(), mod, query, func(ctx context.Context) (err error) {
		info, err = p.cfg.Source.Query(ctx, mod, query)
		return err
	})
	if err == nil && !semver.IsValid(info.Version) {
		err = fmt.Errorf("module proxy: %s@%s resolved to %q, not a version", mod, query, info.Version)
	}
	if err != nil {
		textError(w, http.StatusNotFound, err.Error())
		return
	}
	body, _ := json.Marshal(info)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// serveFile answers .info, .mod and .zip for a canonical version from
// the module cache, downloading the version first when it is missing.
func (p *Proxy) serveFile(w http.ResponseWriter, r *http.Request, req request) {
	escMod, err := module.EscapePath(req.mod)
	if err != nil {
		textError(w, http.StatusBadRequest, "module proxy: bad request: "+err.Error())
		return
	}
	escVer, err := module.EscapeVersion(req.version)
	if err != nil {
		textError(w, http.StatusBadRequest, "module proxy: bad request: "+err.Error())
		return
	}
	ext, ctype := ".zip", "application/zip"
	switch req.kind {
	case kindInfo:
		ext, ctype = ".info", "application/json"
	case kindMod:
		ext, ctype = ".mod", "text/plain; charset=utf-8"
	}
	rel := escMod + "/@v/" + escVer + ext
	f, fi, err := p.open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		err = p.budget.check(req.mod, req.version)
		if err == nil {
			err = p.fetch(r.Context(), req.mod, req.version, func(ctx context.Context) error {
				return p.cfg.Source.Download(ctx, req.mod, req.version)
			})
			p.budget.charge(p.cfg.ModCache, escMod, escVer)
		}
		if err == nil {
			f, fi, err = p.open(rel)
		}
	}
	if err != nil {
		textError(w, http.StatusNotFound, err.Error())
		return
	}
	defer f.Close()
	if fi.Size() > p.cfg.MaxFileBytes {
		textError(w, http.StatusNotFound, fmt.Sprintf("module proxy: %s@%s%s is %d bytes, over this proxy's limit of %d", req.mod, req.version, ext, fi.Size(), p.cfg.MaxFileBytes))
		return
	}
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// open opens rel (escaped module path/@v/file) under the module cache's
// cache/download through an os.Root, which refuses any path that would
// leave it; only regular files are served.
func (p *Proxy) open(rel string) (*os.File, fs.FileInfo, error) {
	root, err := os.OpenRoot(filepath.Join(p.cfg.ModCache, "cache", "download"))
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("module proxy: %s is not a regular file: %w", rel, fs.ErrNotExist)
	}
	return f, fi, nil
}

// fetch runs do in a fetch slot, bounded by FetchTimeout (the wait for
// a slot included), and logs it.
func (p *Proxy) fetch(ctx context.Context, mod, what string, do func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.FetchTimeout)
	defer cancel()
	start := time.Now()
	release, ok := p.clients.acquire(ctx, clientOf(ctx))
	if !ok {
		return fmt.Errorf("module proxy: %s@%s: no fetch slot within %v (this sandbox has %d fetches running, the most one may)", mod, what, p.cfg.FetchTimeout, p.cfg.MaxFetchesPerClient)
	}
	defer release()
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("module proxy: %s@%s: no fetch slot within %v (%d fetches at once at most)", mod, what, p.cfg.FetchTimeout, p.cfg.MaxFetches)
	}
	defer func() { <-p.slots }()
	err := do(ctx)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("module proxy: fetching %s@%s took longer than %v: %w", mod, what, p.cfg.FetchTimeout, err)
	}
	p.fetches.InfoContext(ctx, "module proxy: fetch", "module", mod, "query", what, "elapsed", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

func textError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(strings.TrimRight(msg, "\n") + "\n"))
}
