package goruntime

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
)

// CheckPath checks a path naming something inside the work directory
// (/app) before it is sent: relative, with no ".." element and no NUL
// byte; "." names /app itself. It is the host's early refusal, with an
// error that says why, not the boundary: ValidateFiles,
// Session.ReadFileRange, the agent-sandbox backend's ReadFile and List and
// the MCP tools call it, while the local backend sends read and list paths
// as they are, and the runtime server confines every name it is sent to
// its base directory itself (internal/server/pathsafe). Errors wrap
// ErrPathEscape and quote p.
func CheckPath(p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte: %w", p, ErrPathEscape)
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return fmt.Errorf("path %q is absolute: %w", p, ErrPathEscape)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("path %q contains \"..\": %w", p, ErrPathEscape)
	}
	return nil
}

// CheckName checks a plain file name, as Sandbox.WriteFile takes one: not
// empty, not "." or "..", and without "/", "\" or a NUL byte (the
// agent-sandbox SDK's Write takes no sub-path; "\" is refused as
// CheckPath refuses a leading one, so every backend takes the same
// names). Errors wrap ErrPathEscape and quote name.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("file name %q: want a plain file name (no slash, backslash or NUL; not \".\" or \"..\"): %w", name, ErrPathEscape)
	}
	return nil
}

// ValidateFiles checks that every path is relative, clean of ".." and
// unique, and that no path is also a parent directory of another (main.go
// and main.go/x cannot both be written). Errors name the path; those for
// a path leading outside the work directory wrap ErrPathEscape.
func ValidateFiles(files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		p := f.Path
		if p == "" {
			return fmt.Errorf("file path is empty: %w", ErrPathEscape)
		}
		if err := CheckPath(p); err != nil {
			return fmt.Errorf("file %w", err)
		}
		for _, el := range strings.Split(p, "/") {
			if len(el) > maxNameBytes {
				return fmt.Errorf("file path %q has an element of %d bytes; at most %d", clip.String(p, 80), len(el), maxNameBytes)
			}
		}
		clean := path.Clean(p)
		if clean == "." {
			return fmt.Errorf("file path %q names the work directory itself: %w", p, ErrPathEscape)
		}
		if strings.HasSuffix(p, "/") {
			return fmt.Errorf("file path %q ends in \"/\": name a file, not a directory", p)
		}
		if seen[clean] {
			return fmt.Errorf("file path %q given twice", p)
		}
		seen[clean] = true
	}
	for _, f := range files {
		clean := path.Clean(f.Path)
		for dir := path.Dir(clean); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return fmt.Errorf("file path %q is inside %q, which is also given as a file: send one or the other", f.Path, dir)
			}
		}
	}
	return nil
}

// maxNameBytes is the longest file name element Linux file systems take
// (NAME_MAX).
const maxNameBytes = 255

// ValidateEnv checks that every name is a shell variable name
// ([A-Za-z_][A-Za-z0-9_]*) and no value holds a NUL byte.
func ValidateEnv(env map[string]string) error {
	for k, v := range env {
		if !shell.ValidName(k) {
			return fmt.Errorf("environment variable name %q: want %s", k, shell.NamePattern)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s: value contains a NUL byte", k)
		}
	}
	return nil
}

// Validate checks an ExecRequest where it enters a backend (its Exec or
// ExecStream), before anything is sent: no NUL byte in Command, Env as
// ValidateEnv says, a Dir that CheckPath takes. The layers under the entry
// (the runtime-contract and process API clients) do not check again.
func (r ExecRequest) Validate() error {
	if strings.ContainsRune(r.Command, 0) {
		return errors.New("command contains a NUL byte")
	}
	if err := ValidateEnv(r.Env); err != nil {
		return err
	}
	if err := CheckPath(r.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	return nil
}
