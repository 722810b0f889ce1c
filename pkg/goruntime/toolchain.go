package goruntime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// ErrToolchainUnavailable: a Request named a Go version the sandbox cannot
// run offline. The wrapping error lists the versions it can run and how
// to add one.
var ErrToolchainUnavailable = errors.New("go toolchain not available")

// ToolchainSandbox is implemented by sandboxes that can tell which Go
// toolchains they run without network: their own, and those provisioned
// as golang.org/toolchain modules in the module cache they resolve
// modules from.
type ToolchainSandbox interface {
	Sandbox
	// Toolchains returns the sandbox's own Go version ("go1.26.8") and the
	// others it can switch to, sorted.
	Toolchains(ctx context.Context) (current string, others []string, err error)
	// ToolchainEnv returns the environment that makes a command's go be
	// version (one of Toolchains' others).
	ToolchainEnv(version string) map[string]string
}

// goVersionRE is a Go release version as go.mod's toolchain line and
// GOTOOLCHAIN take it, with or without the "go" prefix.
var goVersionRE = regexp.MustCompile(`^(?:go)?(1\.\d+(?:\.\d+)?(?:(?:rc|beta)\d+)?)$`)

// NormalizeGoVersion turns "1.25.9" or "go1.25.9" into "go1.25.9". It
// returns an error for anything else.
func NormalizeGoVersion(v string) (string, error) {
	m := goVersionRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", fmt.Errorf("go version %q: want a release such as 1.25.9 or go1.25.9", v)
	}
	return "go" + m[1], nil
}

// toolchainEnv returns env with GOTOOLCHAIN set for version (empty: env
// unchanged). When the sandbox can list its toolchains, a version it does
// not have is refused with ErrToolchainUnavailable.
func (s *Session) toolchainEnv(ctx context.Context, version string, env map[string]string) (map[string]string, error) {
	if version == "" {
		return env, nil
	}
	v, err := NormalizeGoVersion(version)
	if err != nil {
		return nil, err
	}
	if ts, ok := s.sb.(ToolchainSandbox); ok {
		current, others, err := ts.Toolchains(ctx)
		if err != nil {
			return nil, fmt.Errorf("list go toolchains: %w", err)
		}
		if v == current {
			return env, nil
		}
		if !slices.Contains(others, v) {
			avail := append([]string{current + " (default)"}, others...)
			return nil, fmt.Errorf("%s: this sandbox can run %s; provision more on the host with `toolchains add %s` (cmd/toolchains; needs network once): %w",
				v, strings.Join(avail, ", "), strings.TrimPrefix(v, "go"), ErrToolchainUnavailable)
		}
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	if ts, ok := s.sb.(ToolchainSandbox); ok {
		maps.Copy(out, ts.ToolchainEnv(v))
	} else {
		// The go command switches itself, fetching the toolchain from
		// the sandbox's GOPROXY.
		out["GOTOOLCHAIN"] = v
	}
	return out, nil
}
