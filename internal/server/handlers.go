package server

import (
	"bytes"
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxCommandBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("Request body exceeds %d bytes", s.cfg.MaxCommandBytes))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Reading request body failed: %v", err))
		return
	}
	var req struct {
		Command        *string           `json:"command"`
		TimeoutSeconds *float64          `json:"timeout_seconds"`
		Env            map[string]string `json:"env"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		validationError(w, "", "json_invalid", fmt.Sprintf("JSON decode error: %v", err))
		return
	}
	if req.Command == nil {
		validationError(w, "command", "missing", "Field required")
		return
	}
	spec := execSpec{command: *req.Command, timeout: s.cfg.ExecTimeout, env: req.Env}
	if strings.IndexByte(spec.command, 0) >= 0 {
		validationError(w, "command", "value_error", "command must not contain a NUL byte")
		return
	}
	if t := req.TimeoutSeconds; t != nil {
		if !(*t > 0) || math.IsInf(*t, 0) || *t > maxTimeout.Seconds() {
			validationError(w, "timeout_seconds", "value_error",
				fmt.Sprintf("timeout_seconds must be > 0 and at most %d", int(maxTimeout.Seconds())))
			return
		}
		spec.timeout = time.Duration(*t * float64(time.Second))
	}
	for k, v := range req.Env {
		if !shell.EnvironKey(k) || strings.IndexByte(v, 0) >= 0 {
			validationError(w, "env", "value_error",
				fmt.Sprintf("env key %q: keys must be non-empty without '=' or NUL, values without NUL", k))
			return
		}
	}

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
