package mcphttp

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
)

// Limits of the HTTP server, so that clients, authenticated or not,
// cannot hold its descriptors (300 connections refused with 401 stayed
// open 70 s later, up to the fd limit the server would stop accepting and
// opening sandboxes). MCP's long-lived streams are not cut: IdleTimeout
// runs only between requests on a connection, and nothing bounds the
// time a response (an SSE stream, a long tool call) takes.
const (
	// DefaultMaxConns is Config.MaxConns's default: each MCP session
	// holds one to three connections (its GET event stream, a tool call
	// in flight, a notification), so the default 16 sandboxes need ~50.
	DefaultMaxConns = 256
	// DefaultIdleTimeout is Config.IdleTimeout's default.
	DefaultIdleTimeout = 2 * time.Minute
	// readHeaderTimeout bounds reading a request's header.
	readHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout is Config.BodyTimeout's default: a 4 MiB
	// request at 70 KB/s.
	DefaultBodyTimeout = time.Minute
)

// NewServer returns the http.Server for h (Handler's result) with cfg's
// limits: header, body read and idle timeouts, and its own errors (accept
// failures, broken handshakes) logged to cfg.Logger at a bounded rate.
// Serve it on Listen's listener.
func NewServer(h http.Handler, cfg Config) *http.Server {
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	body := cfg.BodyTimeout
	if body <= 0 {
		body = DefaultBodyTimeout
	}
	srv := &http.Server{Handler: bodyDeadline(h, body), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idle}
	if cfg.Logger != nil {
		srv.ErrorLog = slog.NewLogLogger(ratelog.Outside(cfg.Logger).Handler(), slog.LevelWarn)
	}
	return srv
}

// Listen returns ln holding at most cfg.MaxConns connections at once
// (DefaultMaxConns when 0): past them, new connections wait in the
// kernel's listen queue until one closes.
func Listen(ln net.Listener, cfg Config) net.Listener {
	n := cfg.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	return netutil.LimitListener(ln, n)
}

// refusing wraps h so that a refusal (401, 403), whoever answers it (the
// guard, the bearer check, the MCP handler's Host check), closes its
// connection ("Connection: close") and is logged to log at a bounded rate
// (nil: not logged).
func refusing(h http.Handler, log *slog.Logger) http.Handler {
	if log != nil {
		log = ratelog.Outside(log)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&refusalWriter{ResponseWriter: w, r: r, log: log}, r)
	})
}

// refusalWriter is the ResponseWriter refusing hands on. It unwraps for
// http.ResponseController (the MCP handler flushes its streams with one).
type refusalWriter struct {
	http.ResponseWriter
	r   *http.Request
	log *slog.Logger
}

func (w *refusalWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		w.Header().Set("Connection", "close")
		if w.log != nil {
			w.log.Info("mcp http: refused", "status", code, "remote", w.r.RemoteAddr, "method", w.r.Method, "path", w.r.URL.Path, "origin", w.r.Header.Get("Origin"))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyDeadline bounds the time reading a request's body takes, so a
// client trickling a body (a byte every few seconds) cannot hold a
// connection, one of Config.MaxConns, for longer: past the deadline the
// read fails and the connection closes. The deadline is lifted once the
// body is read to its end, so a response that takes long (an SSE
// stream, a long tool call) is not cut; http.Server's own ReadTimeout
// would cut it.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts its connection's read deadline once the body has
// been read to its end. A body that failed (the deadline passed) or was
// left unread keeps it: the server's own read of what is left of the body
// then fails too, and the connection closes.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
