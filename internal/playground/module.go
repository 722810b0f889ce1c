package playground

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// stdinFile holds a Run's standard input in /app; autoGoMod names, in a
// call's file set, the go.mod the playground made for a module without
// one (never a name the editor can give: it has a space).
const (
	stdinFile = ".playground-stdin"
	autoGoMod = "go.mod (made)"
)

// module is an action's checked input.
type module struct {
	req   actionRequest
	files []goruntime.File
	names map[string]bool // what /app may hold after the call (autoGoMod for a made go.mod, stdinFile)
	goMod bool            // the editor gave a go.mod
}

// readModule reads and checks an action's body.
func (s *Server) readModule(w http.ResponseWriter, r *http.Request) (*module, int, error) {
	data, code, err := readBody(w, r, s.cfg.MaxRequestBytes)
	if err != nil {
		return nil, code, err
	}
	var req actionRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("malformed request: want JSON {\"files\": \"<txtar>\", ...}: %w", err)
	}
	if dec.More() {
		return nil, http.StatusBadRequest, errors.New("malformed request: more than one JSON value")
	}
	tfs, err := parseTxtar(req.Files)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("files: %w", err)
	}
	if len(tfs) > s.cfg.MaxFiles {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("files: %d files, at most %d", len(tfs), s.cfg.MaxFiles)
	}
	if req.Version != "" {
		if _, err := goruntime.NormalizeGoVersion(req.Version); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	m := &module{req: req, names: map[string]bool{}}
	for _, f := range tfs {
		if f.Name == stdinFile {
			return nil, http.StatusBadRequest, fmt.Errorf("files: %s is the playground's own name for stdin; rename the file", stdinFile)
		}
		m.files = append(m.files, goruntime.File{Path: f.Name, Data: []byte(f.Data)})
		m.names[f.Name] = true
		if f.Name == "go.mod" {
			m.goMod = true
		}
	}
	if err := goruntime.ValidateFiles(m.files); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("files: %w", sessions.Describe(err))
	}
	if !m.goMod {
		m.names[autoGoMod] = true
	}
	// Every call may leave a Run's stdin file: one left by an earlier Run
	// is no reason to empty /app (a dot file, which the go command
	// ignores, and each Run writes it anew).
	m.names[stdinFile] = true
	return m, 0, nil
}

// ensureGoMod is the shell step that gives a module without go.mod one
// (module play, the go line of the toolchain that runs), as go.dev/play
// does.
func (m *module) ensureGoMod() string {
	if m.goMod {
		return ""
	}
	return "test -f go.mod || go mod init play >/dev/null 2>&1; "
}

// goFiles are the module's .go files.
func (m *module) goFiles() []string {
	var out []string
	for _, f := range m.files {
		if strings.HasSuffix(f.Path, ".go") {
			out = append(out, f.Path)
		}
	}
	return out
}
