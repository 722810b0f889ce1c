package server

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// maxTimeout is the longest per-command timeout the server accepts.
const maxTimeout = 7 * 24 * time.Hour

// execute handles POST /execute.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, _ string) {
	spec, _, ok := s.readExecute(w, r, s.cfg.MaxCommandBytes)
	if ok {
		s.runAnswer(w, r, spec)
	}
}

// unpackExecute handles POST wire.UnpackExecutePath (ours): the request
// is checked whole before anything is written; the archive is written as
// /unpack writes it (holding a file call's slot meanwhile, not while the
// command runs), and only when all of it was is the command run, as
// /execute runs it. Its answers are /execute's and /unpack's; 413 also
// for an archive over wire.MaxInlineArchiveBytes.
func (s *Server) unpackExecute(w http.ResponseWriter, r *http.Request, _ string) {
	// The body's cap: the command's, and the archive's in base64.
	limit := s.cfg.MaxCommandBytes + int64(base64.StdEncoding.EncodedLen(wire.MaxInlineArchiveBytes)+len(`,"archive":""`))
	spec, archive, ok := s.readExecute(w, r, limit)
	if !ok {
		return
	}
	if len(archive) > wire.MaxInlineArchiveBytes {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Archive of %d bytes exceeds the %d an %s request carries; send it to /unpack", len(archive), wire.MaxInlineArchiveBytes, wire.UnpackExecutePath))
		return
	}
	if !s.takeFileSlot(r) {
		return // the caller is gone
	}
	_, written := s.unpackTar(w, tar.NewReader(bytes.NewReader(archive)))
	s.releaseFileSlot()
	if written {
		s.runAnswer(w, r, spec)
	}
}

// readExecute reads and checks an /execute body of at most limit bytes
// (an /unpack-execute body: its archive too). When the request cannot
// be run it answers and returns ok false: 413 over limit, 422 in
// FastAPI's shape for what upstream refuses.
func (s *Server) readExecute(w http.ResponseWriter, r *http.Request, limit int64) (spec execSpec, archive []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Request body exceeds %d bytes", limit))
		return execSpec{}, nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Reading request body failed: %v", err))
		return execSpec{}, nil, false
	}
	var req struct {
		Command        *string           `json:"command"`
		TimeoutSeconds *float64          `json:"timeout_seconds"`
		Env            map[string]string `json:"env"`
		Archive        []byte            `json:"archive"` // read by /unpack-execute alone
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		validationError(w, "", "json_invalid", fmt.Sprintf("JSON decode error: %v", err))
		return execSpec{}, nil, false
	}
	if req.Command == nil {
		validationError(w, "command", "missing", "Field required")
		return execSpec{}, nil, false
	}
	spec = execSpec{command: *req.Command, timeout: s.cfg.ExecTimeout, env: req.Env}
	if strings.IndexByte(spec.command, 0) >= 0 {
		validationError(w, "command", "value_error", "command must not contain a NUL byte")
		return execSpec{}, nil, false
	}
	if t := req.TimeoutSeconds; t != nil {
		if !(*t > 0) || math.IsInf(*t, 0) || *t > maxTimeout.Seconds() {
			validationError(w, "timeout_seconds", "value_error",
				fmt.Sprintf("timeout_seconds must be > 0 and at most %d", int(maxTimeout.Seconds())))
			return execSpec{}, nil, false
		}
		spec.timeout = time.Duration(*t * float64(time.Second))
	}
	for k, v := range req.Env {
		if !shell.EnvironKey(k) || strings.IndexByte(v, 0) >= 0 {
			validationError(w, "env", "value_error",
				fmt.Sprintf("env key %q: keys must be non-empty without '=' or NUL, values without NUL", k))
			return execSpec{}, nil, false
		}
	}
	return spec, req.Archive, true
}

// runAnswer runs spec and answers its result (/execute's 200).
func (s *Server) runAnswer(w http.ResponseWriter, r *http.Request, spec execSpec) {
	ended := s.mets.started("legacy")
	res, err := s.run(r.Context(), spec)
	ended(legacyOutcome(res, err))
	if err != nil {
		// Upstream reports a command it could not start as exit code 1.
		s.log.Error("execute", "command", clip.String(spec.command, 200), "err", err)
		writeJSON(w, http.StatusOK, wire.ExecuteResponse{Stderr: fmt.Sprintf("Failed to execute command: %v", err), ExitCode: 1})
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "exec",
		slog.String("command", clip.String(spec.command, 200)),
		slog.Int("exit_code", res.ExitCode),
		slog.Int("stdout_bytes", len(res.Stdout)),
		slog.Int("stderr_bytes", len(res.Stderr)),
		slog.Bool("timed_out", res.TimedOut),
		slog.Int("signal", res.Signal),
		slog.Float64("duration_ms", res.DurationMS),
		slog.Bool("client_gone", r.Context().Err() != nil),
	)
	writeJSON(w, http.StatusOK, res)
}
