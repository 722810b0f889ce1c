package mcpserver

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
)

// The bounds on sandboxes as mcp-server sets them: the default share of
// one principal (--max-sandboxes-per-principal auto) and the wording of a
// refusal, naming the flag. The count and the check are
// internal/frontend/sessions' (Pool: sessions' sandboxes, Reserve for
// handles; the handles themselves are counted in the backend).

// PerPrincipalAuto is Config.MaxSandboxesPerPrincipal's "auto" (Defaults):
// New sets the share autoShare says.
const PerPrincipalAuto = -1

// autoFallbackShare is the auto share of each of two or more principals
// when MaxSandboxes sets no limit: there is no whole to take half of,
// but one principal must still not take the machine.
const autoFallbackShare = 8

// principalCount is how many principals can call: the tokens', or one
// (stdio, or HTTP without auth: every caller is the same principal).
func (c Config) principalCount() int {
	return max(c.HTTP.CountPrincipals(), 1)
}

// autoShare is the share --max-sandboxes-per-principal=auto gives: with
// two or more principals, half of MaxSandboxes (at least 1), so that
// whatever one principal does, the others keep at least half the server
// (autoFallbackShare when MaxSandboxes is 0); with one principal, no
// bound of its own (MaxSandboxes bounds it, as it bounds the server).
func (c Config) autoShare() int {
	switch {
	case c.principalCount() < 2:
		return 0
	case c.MaxSandboxes <= 0:
		return autoFallbackShare
	}
	return max(c.MaxSandboxes/2, 1)
}

// explainLimit adds to a refusal from the sandbox bounds which flag
// refused it and what the caller can do; other errors pass unchanged.
func (s *Server) explainLimit(err error) error {
	switch {
	case errors.Is(err, sessions.ErrPrincipalFull) && s.cfg.Stateless:
		return fmt.Errorf("%w; each principal may hold %d sandboxes at once (--max-sandboxes-per-principal), so that none locks the others out: pass the sandbox_id of one you hold, or delete_sandbox one you no longer need (list_sandboxes lists them)",
			err, s.cfg.MaxSandboxesPerPrincipal)
	case errors.Is(err, sessions.ErrPrincipalFull):
		return fmt.Errorf("%w; each principal may hold %d sandboxes at once (--max-sandboxes-per-principal), its MCP sessions' and create_sandbox's together, so that none locks the others out: end an MCP session you no longer use (%s), or delete_sandbox one you no longer need (list_sandboxes lists them)",
			err, s.cfg.MaxSandboxesPerPrincipal, idleText(s.cfg.IdleTTL))
	case errors.Is(err, sessions.ErrTooManySandboxes):
		return fmt.Errorf("%w; this server allows %d sandboxes at once, MCP sessions' and every principal's create_sandbox's (--max-sandboxes): end a session or delete_sandbox one you no longer need, or try again later",
			err, s.cfg.MaxSandboxes)
	}
	return err
}

// idleText says when a session's sandbox closes, for a message.
func idleText(ttl time.Duration) string {
	if ttl > 0 {
		return "its sandbox closes with it; an idle one closes after --idle-ttl, " + ttl.String()
	}
	return "its sandbox closes with it; --idle-ttl=0 keeps idle ones"
}

// shareFlag is --max-sandboxes-per-principal's value: a number, or auto
// (PerPrincipalAuto).
type shareFlag struct{ v *int }

func (f shareFlag) String() string {
	switch {
	case f.v == nil:
		return ""
	case *f.v == PerPrincipalAuto:
		return "auto"
	}
	return strconv.Itoa(*f.v)
}

func (f shareFlag) Set(v string) error {
	if v == "auto" {
		*f.v = PerPrincipalAuto
		return nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return fmt.Errorf("--max-sandboxes-per-principal=%s: want a number or auto", v)
	case n < 0:
		return fmt.Errorf("--max-sandboxes-per-principal=%s: must not be negative (0 means no limit, auto the default share)", v)
	}
	*f.v = n
	return nil
}
