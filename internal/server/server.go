package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/pathsafe"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// Config is the server's settings; Main fills it from flags and env.
type Config struct {
	// BaseDir is the directory commands run in and file names are
	// relative to (SANDBOX_BASE_DIR, default /app). Created if missing.
	BaseDir string
	// ExecTimeout bounds each command unless its request sets
	// timeout_seconds (SANDBOX_EXEC_TIMEOUT_SECONDS, default 300 s).
	ExecTimeout time.Duration
	// MaxOutputBytes is each output stream's share of an /execute
	// response in JSON-encoded bytes, truncation marker included
	// (default 8 MiB; two shares fit the SDK's 16 MiB decode limit).
	MaxOutputBytes int
	// MaxUploadBytes caps one uploaded file (default 256 MiB); more is 413.
	MaxUploadBytes int64
	// FileCalls is how many file calls (upload, unpack, download, list,
	// exists, snapshot) run at once; more wait their turn. 0: no bound.
	// Each may hold an OS thread in a blocking system call, so Main
	// keeps them within the threads it reserved (fileCalls).
	FileCalls int
	// MaxCommandBytes caps an /execute request body (default 16 MiB); more is 413.
	MaxCommandBytes int64
	// Environ is the environment commands start from (usually os.Environ()).
	Environ []string
	// FallbackHome is the HOME given to commands when Environ has no
	// writable one; GOPATH, GOMODCACHE and GOCACHE derive from HOME.
	FallbackHome string
	// Reap makes the server collect orphaned descendants (as PID 1, or as
	// a child subreaper otherwise). Only one reaper may run per process,
	// and nothing else in the process may start children while it does.
	Reap bool
	// Log receives one line per request and per command.
	Log *slog.Logger
	// Init runs the server as the init (PID 1) of a sandbox's pid
	// namespace (--init; see sandboxinit.go): it holds and drops every
	// signal whose default would end or stop it, SIGTERM and SIGINT among
	// them (Serve then shuts down only when ctx ends), and makes itself
	// not dumpable. Meant for the process's one Serve.
	Init bool
	// InitGuard, with Init, loads seccomp.GuardedInitPolicy instead of
	// seccomp.ForgedFaultPolicy (--init-guard): for runtimes that do not
	// shield a pid namespace's init from SIGKILL and SIGSTOP sent from
	// inside (gVisor). The server must be PID 1, and the filter must load.
	InitGuard bool
	// Lifeline, when not nil, is the read end of a pipe whose write end
	// the sandbox's owner holds (--lifeline-fd): EOF exits the process at
	// once, the line "detach" stops the watch.
	Lifeline *os.File
	// LogLevel is passed to the process API companion ("" : its default,
	// info).
	LogLevel string
	// CompanionStderr is where the process API companion's stderr (its
	// logs) goes; nil: this process's stderr.
	CompanionStderr io.Writer
	// ProcessAPIBin is the process API companion binary
	// (cmd/sandbox-processapi) started on the first connection to the
	// sandboxd listeners; empty: ProcessAPIName next to this executable.
	ProcessAPIBin string
	// ProcessAPI, when set, serves the sandboxd API in this process
	// instead of the companion (a program that links gRPC anyway).
	ProcessAPI ProcessAPIFunc
	// IdleExit, when positive, makes Serve stop once no request or
	// command has been in flight for this long (--idle-exit; idle.go).
	// As a sandbox's init, the server's exit ends the sandbox.
	IdleExit time.Duration
	// GoTelemetry, when set (off, local or on), is the go command's
	// telemetry mode for commands: New writes it where `go telemetry`
	// does under the commands' config directory, unless a mode is there
	// (goTelemetry). A sandbox's server sets off: nothing of the go
	// command's counters under HOME, and ~2 ms less a go command.
	GoTelemetry string
}

// Server serves the runtime contract over HTTP. Create it with New.
type Server struct {
	cfg   Config
	base  *baseRoot // the base directory: root()
	env   []string
	procs procStarter
	reap  *reaper
	log   *slog.Logger
	mets  *metrics
	act   *activity // idle.go

	// Snapshots (snapshot.go): what changes the files, one snapshot or
	// restore at a time, the companion's pid (not a process a command
	// left), and the change time before which a cache file is the one the
	// sandbox started with.
	chg        *changes
	snapMu     sync.Mutex
	companion  atomic.Int64
	cacheEpoch time.Time
	snapDrain  time.Duration // how long quiet waits for changes in flight (snapDrain; tests shorten it)

	fileSlots chan struct{} // Config.FileCalls; nil: no bound
}

// New checks cfg, creates the base directory and the command environment's
// directories, and returns a Server. Call Run to reap orphans when
// cfg.Reap is set, and Close when done.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.BaseDir == "":
		return nil, fmt.Errorf("new runtime server: base directory is empty")
	case cfg.ExecTimeout <= 0:
		return nil, fmt.Errorf("new runtime server: exec timeout %s is not positive", cfg.ExecTimeout)
	case cfg.MaxOutputBytes < 2*streamReserve:
		return nil, fmt.Errorf("new runtime server: max output bytes %d is below %d", cfg.MaxOutputBytes, 2*streamReserve)
	case cfg.MaxUploadBytes <= 0:
		return nil, fmt.Errorf("new runtime server: max upload bytes %d is not positive", cfg.MaxUploadBytes)
	}
	if cfg.MaxCommandBytes <= 0 {
		cfg.MaxCommandBytes = 16 << 20
	}
	if err := mkdirAll(cfg.BaseDir); err != nil {
		return nil, fmt.Errorf("new runtime server: create base directory: %w", err)
	}
	base, err := openBaseRoot(cfg.BaseDir, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("new runtime server: %w", err)
	}
	env, chosen, err := commandEnv(cfg.Environ, cfg.FallbackHome)
	if err != nil {
		base.close()
		return nil, fmt.Errorf("new runtime server: command environment: %w", err)
	}
	for k, v := range chosen {
		cfg.Log.Info("command environment default", "var", k, "value", v)
	}
	if cfg.GoTelemetry != "" {
		if err := goTelemetry(envMap(env), cfg.GoTelemetry); err != nil {
			cfg.Log.Warn("the go command's telemetry mode for commands is left as it was", "mode", cfg.GoTelemetry, "err", err)
		}
	}
	act := newActivity(time.Now())
	s := &Server{cfg: cfg, base: base, env: env, procs: plainStarter{}, log: cfg.Log, mets: newMetrics(), act: act, chg: &changes{}, snapDrain: snapDrain}
	if cfg.FileCalls > 0 {
		s.fileSlots = make(chan struct{}, cfg.FileCalls)
	}
	s.mets.act, s.mets.chg = act, s.chg
	s.cacheEpoch = cacheEpoch(envMap(env)["GOCACHE"])
	if s.cacheEpoch.IsZero() {
		s.cacheEpoch = time.Now()
	}
	if cfg.Reap {
		s.reap = newReaper(cfg.Log)
		if err := s.reap.enable(); err != nil {
			base.close()
			return nil, fmt.Errorf("new runtime server: %w", err)
		}
		s.procs = s.reap
	}
	return s, nil
}

// Run reaps orphans until ctx is done when the server was configured to
// (Config.Reap); otherwise it returns at once.
func (s *Server) Run(ctx context.Context) {
	if s.reap != nil {
		s.reap.run(ctx)
	}
}

// Close releases the base directory.
func (s *Server) Close() error { return s.base.close() }

// root is the base directory as its path names it now (baseRoot).
func (s *Server) root() *pathsafe.Root { return s.base.get() }

// ServeHTTP routes a request. Paths are split by hand on the escaped form,
// so an encoded "/" or ".." reaches path resolution (and its 403) instead
// of being cleaned away by a mux redirect.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" { // a scrape is not a use (idle.go)
		defer s.act.enter()()
	}
	start := time.Now()
	lw := &loggingWriter{ResponseWriter: w, status: http.StatusOK}
	s.route(lw, r)
	s.mets.httpBytes(lw.bodyIn(r), lw.written)
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method),
		slog.String("path", clip.String(r.URL.EscapedPath(), 200)),
		slog.Int("status", lw.status),
		slog.Int64("bytes_in", lw.bodyIn(r)),
		slog.Int64("bytes_out", lw.written),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	)
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.EscapedPath()
	route, rest, hasRest := strings.Cut(strings.TrimPrefix(raw, "/"), "/")
	var method string
	var handle func(http.ResponseWriter, *http.Request, string)
	var file bool // a file call: takes one of fileSlots
	switch {
	case raw == "/" || raw == "":
		method, handle = http.MethodGet, s.health
	case raw == "/metrics":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
			return
		}
		s.mets.handler().ServeHTTP(w, r)
		return
	case route == "execute" && !hasRest:
		method, handle = http.MethodPost, s.execute
	case route == "upload" && !hasRest:
		method, handle = http.MethodPost, s.upload
		defer s.chg.begin()()
		file = true
	case route == "unpack" && !hasRest:
		method, handle = http.MethodPost, s.unpack
		defer s.chg.begin()()
		file = true
	case "/"+route == wire.UnpackExecutePath && !hasRest:
		// A file call while it writes the files only (unpackExecute).
		method, handle = http.MethodPost, s.unpackExecute
		defer s.chg.begin()()
	case "/"+route == wire.SnapshotPath && !hasRest:
		file = true
		method, handle = http.MethodGet, s.snapshotGet
		if r.Method == http.MethodPost {
			method, handle = http.MethodPost, s.snapshotPost
		} else if r.Method == http.MethodHead {
			method = "GET, POST" // a HEAD would take a whole snapshot
		}
	case route == "download" && hasRest:
		method, handle, file = http.MethodGet, s.download, true
	case route == "list" && hasRest:
		method, handle, file = http.MethodGet, s.list, true
	case route == "exists" && hasRest:
		method, handle, file = http.MethodGet, s.exists, true
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Bad path encoding: %v", err))
		return
	}
	if file {
		if !s.takeFileSlot(r) {
			return // the caller is gone
		}
		defer s.releaseFileSlot()
	}
	s.keepBaseUsable()
	handle(w, r, name)
}

// takeFileSlot waits for one of the file calls' slots (Config.FileCalls)
// and reports false when r's caller left first; releaseFileSlot gives it
// back.
func (s *Server) takeFileSlot(r *http.Request) bool {
	if s.fileSlots == nil {
		return true
	}
	select {
	case s.fileSlots <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) releaseFileSlot() {
	if s.fileSlots != nil {
		<-s.fileSlots
	}
}

// keepBaseUsable gives the base directory back its owner's read, write
// and search bits when a command took them away (`chmod 000 /app`): as
// the sandbox's user, every later command would then fail to start in it
// and every file operation be refused, Reset included, and nothing in the
// sandbox could undo it. The server runs as the directory's owner, so
// this needs no privilege a command lacks.
func (s *Server) keepBaseUsable() {
	dir := s.root().Dir()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o700 == 0o700 {
		return
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o700); err != nil {
		s.log.Warn("restore the base directory's owner permissions", "dir", dir, "mode", fi.Mode().Perm(), "err", err)
	}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ string) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "message": "Sandbox Runtime is active."})
}

// writeJSON writes v as the response with status code. HTML characters are
// not escaped, so command output reads as it was written.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client is gone if this fails
}

// writeError answers an error status with a wire.Message carrying code.
func writeError(w http.ResponseWriter, status int, code wire.ErrorCode, msg string) {
	writeJSON(w, status, wire.Message{Message: msg, Code: code})
}

// validationError answers 422 in the shape FastAPI gives upstream's
// clients for a request body it cannot accept.
func validationError(w http.ResponseWriter, field, kind, msg string) {
	loc := []string{"body"}
	if field != "" {
		loc = append(loc, field)
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"detail": []map[string]any{{"type": kind, "loc": loc, "msg": msg}},
	})
}

// loggingWriter records the status and size of a response. It passes
// ReadFrom through so file downloads keep using sendfile.
type loggingWriter struct {
	http.ResponseWriter
	status      int
	written     int64
	wroteHeader bool
}

func (l *loggingWriter) WriteHeader(code int) {
	if !l.wroteHeader {
		l.status, l.wroteHeader = code, true
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *loggingWriter) Write(p []byte) (int, error) {
	l.wroteHeader = true
	n, err := l.ResponseWriter.Write(p)
	l.written += int64(n)
	return n, err
}

func (l *loggingWriter) ReadFrom(src io.Reader) (int64, error) {
	l.wroteHeader = true
	n, err := io.Copy(l.ResponseWriter, src)
	l.written += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (l *loggingWriter) Unwrap() http.ResponseWriter { return l.ResponseWriter }

func (l *loggingWriter) bodyIn(r *http.Request) int64 {
	if r.ContentLength > 0 {
		return r.ContentLength
	}
	return 0
}
