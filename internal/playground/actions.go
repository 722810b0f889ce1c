package playground

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/gotool"
)

// actionRequest is the body of POST /api/run, /api/test, /api/check and
// /api/format.
type actionRequest struct {
	// Files is the module as txtar text.
	Files string `json:"files"`
	// Version is the Go version to run ("" : the sandbox's own).
	Version string `json:"version,omitempty"`
	// Stdin is a Run's standard input.
	Stdin string `json:"stdin,omitempty"`
	// Race and Cover add -race and -cover to a Test.
	Race  bool `json:"race,omitempty"`
	Cover bool `json:"cover,omitempty"`
}

// event is one line of an action's answer (NDJSON), in order: status
// lines while it waits, output as produced, then done (or error).
type event struct {
	// Kind is status, stdout, stderr, done or error.
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
	// Done is set in done events only.
	*Done
}

// Done is what a done event says (exported for encoding/json, which fills embedded structs of exported types only).
type Done struct {
	Outcome     string                 `json:"outcome,omitempty"`
	ExitCode    int                    `json:"exit_code"`
	DurationMS  int64                  `json:"duration_ms"`
	Diagnostics []goruntime.Diagnostic `json:"diagnostics,omitempty"`
	Tests       []testRow              `json:"tests,omitempty"`
	Coverage    []goruntime.Coverage   `json:"coverage,omitempty"`
	// Files is Format's rewritten module (txtar).
	Files string `json:"files,omitempty"`
}

// testRow is one test of the results table.
type testRow struct {
	Name      string `json:"name"`
	Package   string `json:"package"`
	Status    string `json:"status"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Output    string `json:"output,omitempty"`
}

// actionFunc runs one action in sess, sending output to out, and returns
// its done event.
type actionFunc func(ctx context.Context, s *Server, sess *goruntime.Session, m *module, out *stream) (*event, error)

// action serves one of the actions: checks the request (403 without a
// session, 413 past the caps, 400 when malformed), then streams its
// events.
func (s *Server) action(fn actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.session(w, r)
		if !ok {
			return
		}
		m, code, err := s.readModule(w, r)
		if err != nil {
			s.fail(w, code, err)
			return
		}
		out := newStream(w)
		ctx := r.Context()
		var reaped time.Duration
		err = s.pool.Do(ctx, sessions.Call{
			Key:       b.key,
			Principal: principal(r),
			Ended:     func() <-chan struct{} { return b.ended },
			Open:      true,
			Announce:  func(msg string) { out.send(event{Kind: "status", Text: msg}) },
		}, func(sess *goruntime.Session, idle time.Duration) error {
			reaped = idle
			b.use() // valid, and given its sandbox: accepted
			if b.needsReset(sess.ID(), m.names) {
				if err := sess.Reset(ctx); err != nil {
					return fmt.Errorf("empty /app of files the editor no longer has: %w", err)
				}
			}
			if idle > 0 {
				out.send(event{Kind: "status", Text: fmt.Sprintf("this session's sandbox was closed after %s idle; running in a fresh one", idle.Round(time.Second))})
			}
			ev, err := fn(ctx, s, sess, m, out)
			// Whatever happened, /app may hold this call's files now.
			b.wrote(sess.ID(), m.names)
			if err != nil {
				return err
			}
			out.send(*ev)
			return nil
		})
		if err != nil {
			s.log.Info("playground call failed", "path", r.URL.Path, "reaped", reaped, "err", err)
			if !out.started() {
				s.fail(w, statusOf(err), sessions.Describe(err))
				return
			}
			out.fail(sessions.Describe(err))
		}
	}
}

// runAction: go run . with the request's stdin; not formatted first, so
// the first output byte comes straight from the program.
func runAction(ctx context.Context, s *Server, sess *goruntime.Session, m *module, out *stream) (*event, error) {
	files := append(slices.Clone(m.files), goruntime.File{Path: stdinFile, Data: []byte(m.req.Stdin)})
	res, err := sess.ExecuteStream(ctx, goruntime.Request{
		Files:     files,
		Command:   m.ensureGoMod() + "go run . <" + stdinFile,
		Timeout:   s.cfg.RunTimeout,
		GoVersion: m.req.Version,
	}, out.chunk)
	if err != nil {
		return nil, err
	}
	return doneEvent(res), nil
}

// testAction: go test -v over the module, with -race and -cover when
// asked; the table comes from the run's test results.
func testAction(ctx context.Context, s *Server, sess *goruntime.Session, m *module, out *stream) (*event, error) {
	cmd := "go test -v -count=1"
	if m.req.Race {
		cmd += " -race"
	}
	if m.req.Cover {
		cmd += " -cover"
	}
	res, err := sess.ExecuteStream(ctx, goruntime.Request{
		Files:     m.files,
		Command:   m.ensureGoMod() + cmd + " ./...",
		Timeout:   s.cfg.RunTimeout,
		GoVersion: m.req.Version,
	}, out.chunk)
	if err != nil {
		return nil, err
	}
	ev := doneEvent(res)
	for _, t := range res.Tests {
		ev.Tests = append(ev.Tests, testRow{Name: t.Name, Package: t.Package, Status: string(t.Status),
			ElapsedMS: t.Elapsed.Milliseconds(), Output: t.Output})
	}
	ev.Coverage = res.Coverage
	return ev, nil
}

// checkAction: gofmt, go build and go vet (Session.Check); their
// findings become the editor's markers.
func checkAction(ctx context.Context, s *Server, sess *goruntime.Session, m *module, out *stream) (*event, error) {
	if !m.goMod {
		if _, err := sess.Execute(ctx, goruntime.Request{Files: m.files, Command: m.ensureGoMod()}); err != nil {
			return nil, err
		}
	}
	res, err := sess.Check(ctx, goruntime.CheckRequest{Files: m.files, Timeout: s.cfg.RunTimeout})
	if err != nil {
		return nil, err
	}
	ev := done(&Done{Outcome: "ok", DurationMS: res.Duration.Milliseconds(), Diagnostics: res.Diagnostics})
	if !res.OK() {
		ev.Outcome, ev.ExitCode = "check_failed", 1
		var b strings.Builder
		for _, d := range res.Diagnostics {
			fmt.Fprintf(&b, "%s (%s)\n", d.String(), d.Source)
		}
		out.send(event{Kind: "stderr", Text: b.String()})
	} else {
		out.send(event{Kind: "stdout", Text: "gofmt, go build and go vet found nothing\n"})
	}
	return ev, nil
}

// formatAction: gofmt -w over the module's .go files, then the files read
// back (go.mod and other files as they were).
func formatAction(ctx context.Context, s *Server, sess *goruntime.Session, m *module, out *stream) (*event, error) {
	gofiles := m.goFiles()
	start := time.Now()
	if len(gofiles) == 0 {
		return done(&Done{Outcome: "ok", Files: m.req.Files}), nil
	}
	q := make([]string, len(gofiles))
	for i, f := range gofiles {
		q[i] = goruntime.ShellQuote(f)
	}
	res, err := sess.Execute(ctx, goruntime.Request{Files: m.files, Command: "gofmt -l -w -e -- " + strings.Join(q, " "), Timeout: s.cfg.RunTimeout})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		out.send(event{Kind: "stderr", Text: res.Stderr})
		ev := doneEvent(res)
		ev.Outcome = "format_failed"
		ev.Diagnostics = gotool.ParseBuildOutput(res.Stderr, gotool.SourceGofmt, goruntime.WorkDir)
		return ev, nil
	}
	formatted := make([]textFile, 0, len(m.files))
	for _, f := range m.files {
		data := f.Data
		if strings.HasSuffix(f.Path, ".go") {
			if data, err = sess.ReadFile(ctx, f.Path); err != nil {
				return nil, fmt.Errorf("read %s back after gofmt: %w", f.Path, err)
			}
		}
		formatted = append(formatted, textFile{Name: f.Path, Data: string(data)})
	}
	if strings.TrimSpace(res.Stdout) != "" {
		out.send(event{Kind: "stdout", Text: "formatted: " + strings.Join(strings.Fields(res.Stdout), ", ") + "\n"})
	} else {
		out.send(event{Kind: "stdout", Text: "already formatted\n"})
	}
	return done(&Done{Outcome: "ok", DurationMS: time.Since(start).Milliseconds(), Files: formatTxtar(formatted)}), nil
}

// doneEvent is the done event of a command's result.
func doneEvent(res *goruntime.Result) *event {
	return done(&Done{Outcome: string(res.Outcome), ExitCode: res.ExitCode,
		DurationMS: res.Duration.Milliseconds(), Diagnostics: res.Diagnostics})
}

// done is the done event saying r.
func done(r *Done) *event { return &event{Kind: "done", Done: r} }

// versions answers the Go versions the session's sandbox runs: its own
// first, then the others provisioned (opening the sandbox, so that the
// first Run finds it ready).
func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	b, ok := s.session(w, r)
	if !ok {
		return
	}
	var current string
	var others []string
	err := s.pool.Do(r.Context(), sessions.Call{Key: b.key, Principal: principal(r), Ended: func() <-chan struct{} { return b.ended }, Open: true},
		func(sess *goruntime.Session, _ time.Duration) error {
			b.use() // given its sandbox: accepted
			ts, ok := sess.Sandbox().(goruntime.ToolchainSandbox)
			if !ok {
				return nil
			}
			var err error
			current, others, err = ts.Toolchains(r.Context())
			return err
		})
	if err != nil {
		s.fail(w, statusOf(err), sessions.Describe(err))
		return
	}
	writeJSON(w, map[string]any{"current": current, "others": others})
}

// statusOf is the HTTP status of a call's error before any answer was
// sent.
func statusOf(err error) int {
	switch {
	case errors.Is(err, sessions.ErrTooManySandboxes), errors.Is(err, sessions.ErrPrincipalFull):
		return http.StatusTooManyRequests
	case errors.Is(err, goruntime.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
