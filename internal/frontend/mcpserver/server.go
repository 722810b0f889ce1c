package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Server is the MCP server. Create it with New, serve it with ServeStdio
// or Handler/ServeHTTP, and Close it to end every sandbox.
type Server struct {
	cfg  Config
	log  *slog.Logger
	mcp  *mcp.Server
	pool *sessions.Pool

	metrics *metrics
	calls   *inflight
	failed  failedCalls
	streams *callStreams
}

// protocolVersions are the MCP versions the server speaks. A stateful
// server speaks the ones with sessions (2025-11-25 and earlier): a call
// without sandbox_id uses its MCP session's sandbox, and the
// session-less 2026-07-28 protocol has none to tie it to; clients that
// try it first fall back through initialize. A stateless server speaks
// them all (Config.Stateless).
func protocolVersions(stateless bool) []string {
	var vs []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if stateless || v < "2026-07-28" {
			vs = append(vs, v)
		}
	}
	return vs
}

// New builds a Server. Errors name the bad Config field.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, failed: newFailedCalls(cfg.Logger)}
	s.metrics = newMetrics(func() int { return s.pool.Open() }, s.countHandles)
	pc := sessions.Config{
		Backend:         cfg.Backend,
		Session:         cfg.Session,
		OpenTimeout:     cfg.OpenTimeout,
		Claim:           cfg.Claim,
		Persistent:      cfg.Persistent,
		MaxSandboxes:    cfg.MaxSandboxes,
		MaxPerPrincipal: cfg.MaxSandboxesPerPrincipal,
		Logger:          cfg.Logger,
		Opened:          s.metrics.opened,
	}
	if _, ok := cfg.Backend.(goruntime.HandleBackend); ok {
		// Handles are sandboxes too: --max-sandboxes and
		// --max-sandboxes-per-principal bound them with the sessions'
		// (create reserves its room with pool.Reserve).
		pc.Others = s.countHandles
		pc.OthersOf = s.countHandlesOf
	}
	s.pool = sessions.New(pc)
	if n := cfg.principalCount(); n > 1 && (cfg.MaxSandboxesPerPrincipal == 0 ||
		cfg.MaxSandboxes > 0 && cfg.MaxSandboxesPerPrincipal >= cfg.MaxSandboxes) {
		s.log.Warn("one principal can hold every sandbox and lock the other principals out: --max-sandboxes-per-principal is not below --max-sandboxes (auto gives each principal half)",
			"principals", n, "max_sandboxes_per_principal", cfg.MaxSandboxesPerPrincipal, "max_sandboxes", cfg.MaxSandboxes)
	}
	caps := capabilities()
	s.mcp = mcp.NewServer(&mcp.Implementation{
		Name:    "go-runtime-sandbox",
		Title:   "Go runtime sandbox",
		Version: cfg.Version,
	}, &mcp.ServerOptions{
		Instructions:              instructions,
		Logger:                    sdkLogger(cfg.Logger),
		SupportedProtocolVersions: protocolVersions(cfg.Stateless),
		Capabilities:              caps,
	})
	s.calls = newInflight(cfg.Stateless)
	s.streams = newCallStreams(cfg.Stateless, cfg.Logger)
	// Outermost first: metrics see the answer a stopped call gets.
	s.mcp.AddReceivingMiddleware(s.metrics.middleware, undeclared(caps), s.calls.middleware, s.streams.middleware, s.ssePollMiddleware)
	s.addTools()
	return s, nil
}

// MCP returns the underlying SDK server, to connect it to other transports.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// ServeStdio serves one client over r and w (a process's stdin and stdout)
// until the client hangs up or ctx is done, then ends the sandbox (or
// leaves it running with Config.Persistent). A message (one line) longer
// than Config.MaxRequestBytes is dropped unread and, when it is a request,
// answered with a JSON-RPC error carrying its id; the session goes on.
//
// With Config.Claim it attaches to that sandbox before serving and returns
// an error naming the ID (wrapping goruntime.ErrSandboxNotFound when no
// such sandbox exists) without serving when it cannot, so a bad ID stops
// the process at once instead of failing every later call.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	if s.cfg.Claim != "" {
		if err := s.attachClaim(ctx); err != nil {
			return err
		}
	} else if s.cfg.OpenAtStart {
		go s.openAtStart(ctx)
	}
	err := s.serveStdio(ctx, r, w)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpenTimeout)
	defer cancel()
	cerr := s.Close(cctx)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return errors.Join(fmt.Errorf("serve stdio: %w", err), cerr)
	}
	return cerr
}

// serveStdio runs the MCP session over r and w until the client hangs up
// or ctx is done. When ctx ends first, the tool calls in flight are
// stopped and answered (shutdownMessage) before the connection closes.
func (s *Server) serveStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	tr, out := s.stdioTransport(r, w)
	ss, err := s.mcp.Connect(context.WithoutCancel(ctx), tr, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	answered := out.responses.Load()
	if n := s.calls.stopAndWait(dctx); n > 0 {
		out.waitResponses(dctx, answered+int64(n))
		s.log.Info("stopping: tool calls in flight were stopped and answered", "calls", n)
	}
	_ = ss.Close()
	<-ended
	return nil
}

// stdioTransport is the go-sdk's IOTransport over r and w with a
// frameLimiter in front: a line over Config.MaxRequestBytes is dropped and
// a request among them answered with an error naming the limit, instead of
// the go-sdk ending the session; the answer of a call its client
// cancelled is dropped (stdioCancels). The go-sdk's own cap is set to the same
// limit (plus the newline, which it counts); it trips only on a message
// spread over several lines, which the stdio transport forbids.
func (s *Server) stdioTransport(r io.ReadCloser, w io.WriteCloser) (*mcp.IOTransport, *lockedWriter) {
	limit := s.cfg.MaxRequestBytes
	cancels := newStdioCancels()
	out := &lockedWriter{w: w, keep: cancels.keep}
	in := newFrameLimiter(r, limit, func(f oversizeFrame) {
		s.log.Warn("dropped a stdio message over the request size limit (--max-request-mb)",
			"bytes", f.Bytes, "limit_bytes", limit, "method", f.Method, "id", string(f.ID))
		if !f.Request || f.ID == nil {
			return // a notification or a response gets no reply; an unusable id cannot get one
		}
		if _, err := out.Write(oversizeReply(f, limit)); err != nil {
			s.log.Warn("reply to an oversize stdio message", "err", err)
		}
	})
	in.passed = cancels.read
	return &mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: int(limit) + 1}, out
}

// openAtStart opens the stdio session's sandbox ahead of the first call
// (Config.OpenAtStart). A failure is logged; the first call tries again.
func (s *Server) openAtStart(ctx context.Context) {
	err := s.pool.OpenNow(ctx, sessions.ProcessKey, mcphttp.StdioPrincipal)
	if err != nil && ctx.Err() == nil && !errors.Is(err, goruntime.ErrClosed) {
		s.log.Warn("open the sandbox at startup; the first tool call will try again", "err", err)
	}
}

// attachClaim attaches the stdio session's slot to the sandbox
// Config.Claim names.
func (s *Server) attachClaim(ctx context.Context) error {
	if err := s.pool.OpenNow(ctx, sessions.ProcessKey, mcphttp.StdioPrincipal); err != nil {
		if errors.Is(err, goruntime.ErrSandboxNotFound) {
			return fmt.Errorf("--claim: %w (use an ID an earlier --persistent run logged; a server started without --persistent closes its sandbox on exit)", err)
		}
		return fmt.Errorf("--claim: %w", err) // the library names the backend and the ID
	}
	return nil
}

// Handler returns the Streamable HTTP handler: one sandbox per MCP
// session, behind the guard Config.HTTP configures (403 for a foreign
// Origin, 401 without the token when one is set; the go-sdk adds its Host
// check and the body cap). It refuses Claim and Persistent, which name one sandbox for the
// whole process.
func (s *Server) Handler() (http.Handler, error) {
	if s.cfg.Claim != "" {
		return nil, errors.New("--claim attaches one sandbox to the whole process and works over stdio only; over HTTP each MCP session gets its own sandbox")
	}
	if s.cfg.Persistent {
		return nil, errors.New("--persistent keeps the one stdio sandbox for a later --claim and works over stdio only; HTTP sandboxes end with their MCP session (or use create_sandbox)")
	}
	if s.cfg.Stateless {
		if _, err := s.handles(); err != nil {
			return nil, fmt.Errorf("--stateless: %w", err)
		}
	}
	// Streams' events are kept (bounded) so a client that lost its
	// connection during a long call, or whose stream the server closed
	// (Config.SSECloseAfter, ssepoll.go), reconnects with Last-Event-ID
	// and gets the result; the go-sdk then opens each stream with a
	// priming event (2025-11-25 clients), which also sends the response
	// headers at once. MCP 2026-07-28 has no resumption; a stateless
	// server resumes nothing (a call ends with its POST: cancel.go).
	events := mcp.NewMemoryEventStore(nil)
	events.SetMaxBytes(s.cfg.EventStoreBytes)
	var timeout time.Duration
	if s.cfg.IdleTTL > 0 {
		timeout = s.cfg.IdleTTL
	}
	// Any client can make the SDK log (a malformed initialize logs an
	// error): its records go through a bounded rate.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: timeout, Logger: ratelog.Outside(sdkLogger(s.log)), MaxRequestBodyBytes: s.cfg.MaxRequestBytes,
			Stateless: s.cfg.Stateless, EventStore: events})
	return mcphttp.Handler(sseEventNames(s.streams.handler(h)), s.httpConfig())
}

// httpConfig is Config.HTTP with the server's logger when it has none.
func (s *Server) httpConfig() mcphttp.Config {
	c := s.cfg.HTTP
	if c.Logger == nil {
		c.Logger = s.log
	}
	return c
}

// ServeHTTP serves Streamable HTTP on ln (at path /mcp and /) until ctx is
// done, reaping idle sandboxes, then ends every sandbox.
func (s *Server) ServeHTTP(ctx context.Context, ln net.Listener) error {
	h, err := s.Handler()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h)
	srv := mcphttp.NewServer(mux, s.httpConfig())

	rctx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	if s.cfg.IdleTTL > 0 {
		go s.pool.RunReaper(rctx, s.cfg.IdleTTL)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(mcphttp.Listen(ln, s.cfg.HTTP)) }()
	s.log.Info("serving MCP over Streamable HTTP", "addr", ln.Addr().String(), "backend", s.cfg.Backend.Name())
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Tool calls in flight are stopped and answered before their sessions end.
	s.calls.stopAndWait(sctx)
	// Shutdown waits for open SSE streams; end MCP sessions first so their
	// streams close, then the sandboxes.
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	_ = srv.Shutdown(sctx)
	cerr := s.Close(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(fmt.Errorf("serve http: %w", err), cerr)
	}
	return cerr
}

// Close ends every sandbox (Disconnect instead of Close for the stdio
// sandbox with Config.Persistent), waiting for calls in flight until ctx
// is done, and writes the summary of the failed calls' log lines held
// back (failures.go).
func (s *Server) Close(ctx context.Context) error {
	err := s.pool.Close(ctx)
	s.failed.flush(ctx)
	return err
}

// Reap closes the sandboxes idle for longer than ttl and returns how many
// it closed. ServeHTTP runs it periodically with Config.IdleTTL.
func (s *Server) Reap(ctx context.Context, ttl time.Duration) int {
	return s.pool.Reap(ctx, ttl)
}

// OpenSandboxes reports how many sandboxes the server holds open.
func (s *Server) OpenSandboxes() int { return s.pool.Open() }

// sdkLogger is the logger handed to the MCP SDK, which logs every session
// start and end at info: those show at debug level, SDK warnings and
// errors always.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(quietHandler{l.Handler()})
}

// quietHandler demotes info records to debug.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, level slog.Level) bool {
	if level == slog.LevelInfo {
		level = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, level)
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(attrs)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
