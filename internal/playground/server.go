package playground

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
)

//go:embed static
var staticFS embed.FS

// contentSecurityPolicy allows the page its own script, style and API
// and nothing else: no inline script, no other origin, no frames.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Server is the playground: its page and its API.
type Server struct {
	cfg      Config
	log      *slog.Logger
	pool     *sessions.Pool
	browsers *browsers
	store    *store
	shares   *rateLimiter // shares per principal
	static   fs.FS
	handler  http.Handler
}

// New returns a Server; Run starts its background work (the idle
// reaper), Close ends its sandboxes.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("playground: Config.Backend is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("playground: embedded assets: %w", err)
	}
	st, err := newStore(cfg.ShareDir, cfg.MaxShareBytes, cfg.MaxShareStoreBytes)
	if err != nil {
		return nil, fmt.Errorf("playground: %w", err)
	}
	s := &Server{
		cfg: cfg,
		log: log,
		pool: sessions.New(sessions.Config{
			Backend:         cfg.Backend,
			OpenTimeout:     cfg.OpenTimeout,
			MaxSandboxes:    cfg.MaxSandboxes,
			MaxPerPrincipal: cfg.MaxPerPrincipal,
			Logger:          log,
		}),
		browsers: newBrowsers(cfg.MaxBrowserSessions),
		store:    st,
		shares:   newRateLimiter(cfg.SharesPerMinute),
		static:   static,
	}
	api := http.NewServeMux()
	api.HandleFunc("POST /api/run", s.action(runAction))
	api.HandleFunc("POST /api/test", s.action(testAction))
	api.HandleFunc("POST /api/check", s.action(checkAction))
	api.HandleFunc("POST /api/format", s.action(formatAction))
	api.HandleFunc("POST /api/versions", s.versions)
	api.HandleFunc("POST /api/share", s.share)
	api.HandleFunc("GET /api/share/{id}", s.shared)
	hcfg := cfg.HTTP
	hcfg.Logger = log
	guarded, err := mcphttp.Handler(api, hcfg)
	if err != nil {
		return nil, fmt.Errorf("playground: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", guarded)
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /p/{id}", s.page)
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
	s.handler = secureHeaders(mux)
	return s, nil
}

// Handler serves the page, its assets and the API.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPConfig is the guard's configuration, for mcphttp.NewServer and
// mcphttp.Listen.
func (s *Server) HTTPConfig() mcphttp.Config { return s.cfg.HTTP }

// Run closes idle sandboxes (after IdleTTL) and forgets idle browser
// sessions (after SessionTTL) until ctx is done.
func (s *Server) Run(ctx context.Context) {
	go s.browsers.runSweeper(ctx, s.cfg.SessionTTL)
	if s.cfg.IdleTTL <= 0 {
		<-ctx.Done()
		return
	}
	s.pool.RunReaper(ctx, s.cfg.IdleTTL)
}

// Close ends every sandbox.
func (s *Server) Close(ctx context.Context) error { return s.pool.Close(ctx) }

// OpenSandboxes reports how many browser sessions' sandboxes are open.
func (s *Server) OpenSandboxes() int { return s.pool.Open() }

// secureHeaders sets the headers every answer carries.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// page serves the playground's page. A page load without a session (or
// any load of a share link, /p/<id>) starts a fresh browser session.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != "" {
		if _, err := s.store.get(id); err != nil {
			s.fail(w, http.StatusNotFound, err)
			return
		}
	}
	if _, ok := s.browsers.lookup(r); !ok || r.PathValue("id") != "" {
		if _, err := s.browsers.mint(w, r, principal(r)); err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, errClientFull) {
				code = http.StatusTooManyRequests
				w.Header().Set("Retry-After", strconv.Itoa(int(unusedTTL/time.Second)))
			}
			s.fail(w, code, err)
			return
		}
	}
	data, err := fs.ReadFile(s.static, "index.html")
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(data)
}

// principal is who makes r: its bearer token's name, or without auth
// mcphttp.AnonymousPrincipal at the client's address, so that one
// address's sandboxes count against a share of their own.
func principal(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.UserID != "" {
		return ti.UserID
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return mcphttp.AnonymousPrincipal + "@" + host
}

// fail answers with code and err's text (a plain-text body the page
// shows as is).
func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.log.Error("playground request failed", "code", code, "err", err)
	}
	http.Error(w, err.Error(), code)
}

// readBody reads r's body up to limit: past it 413, naming the limit.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request too large: at most %d bytes", limit)
	}
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read request: %w", err)
	}
	return data, 0, nil
}

// share stores the request's text and answers its link: for a browser
// session only, SharesPerMinute a principal (429 past it), while the
// store holds less than MaxShareStoreBytes (507 past it).
func (s *Server) share(w http.ResponseWriter, r *http.Request) {
	b, ok := s.session(w, r)
	if !ok {
		return
	}
	if ok, wait := s.shares.take(principal(r), time.Now()); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.fail(w, http.StatusTooManyRequests, fmt.Errorf("too many shares: at most %d a minute; try again in %d s", s.cfg.SharesPerMinute, secs))
		return
	}
	data, code, err := readBody(w, r, s.cfg.MaxShareBytes)
	if err != nil {
		if code == http.StatusRequestEntityTooLarge {
			err = fmt.Errorf("too large to share: at most %d bytes may be shared", s.cfg.MaxShareBytes)
		}
		s.fail(w, code, err)
		return
	}
	if _, err := parseTxtar(string(data)); err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("share: %w", err))
		return
	}
	id, err := s.store.put(data)
	if errors.Is(err, errStoreFull) {
		s.fail(w, http.StatusInsufficientStorage, err)
		return
	}
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	b.use() // stored: accepted
	writeJSON(w, map[string]string{"id": id, "url": "/p/" + id})
}

// shared answers a shared text.
func (s *Server) shared(w http.ResponseWriter, r *http.Request) {
	data, err := s.store.get(r.PathValue("id"))
	if errors.Is(err, errNoShare) {
		s.fail(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(data)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// session returns the browser session of an API request, or answers 403
// when it has none. The caller marks it used (browser.use) once the call
// is accepted.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (*browser, bool) {
	b, ok := s.browsers.lookup(r)
	if !ok {
		s.fail(w, http.StatusForbidden, errors.New("no playground session (the page's cookie is missing or has expired): reload the page"))
		return nil, false
	}
	return b, true
}
