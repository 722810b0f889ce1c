package playground

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Config configures a Server. Start from Defaults; cmd/playground sets it
// from its flags.
type Config struct {
	// Backend provisions the sandboxes. Required.
	Backend goruntime.Backend
	// ShareDir holds shared texts, one file per link. Required.
	ShareDir string
	// OpenTimeout bounds opening one sandbox.
	OpenTimeout time.Duration
	// RunTimeout is a Run's or Test's time limit; Check and Format get it
	// per step.
	RunTimeout time.Duration
	// IdleTTL closes a browser session's sandbox after this long without a
	// call (0: never); the session's next call opens a fresh one.
	IdleTTL time.Duration
	// SessionTTL forgets a browser session (its cookie then gets 403,
	// "reload the page") after this long without a request; at least
	// IdleTTL.
	SessionTTL time.Duration
	// MaxSandboxes bounds the sandboxes open at once (0: no bound).
	MaxSandboxes int
	// MaxPerPrincipal bounds one principal's sandboxes at once (0: no
	// bound); without auth a principal is a client address.
	MaxPerPrincipal int
	// MaxBrowserSessions bounds the browser sessions remembered at once:
	// past it a new page load gets 503.
	MaxBrowserSessions int
	// MaxRequestBytes caps an API request's body (413 past it).
	MaxRequestBytes int64
	// MaxShareBytes caps a shared text (413 past it).
	MaxShareBytes int64
	// MaxShareStoreBytes caps all shared texts in ShareDir together: past
	// it a new text gets 507 (a text shared before still gets its link).
	MaxShareStoreBytes int64
	// SharesPerMinute is how many shares one principal may make a minute
	// (a token bucket of as many): past it 429 with Retry-After.
	SharesPerMinute int
	// MaxFiles caps the files of one module.
	MaxFiles int
	// HTTP is the API's guard: allowed origins, bearer token, principals
	// (mcphttp.Handler), connection caps.
	HTTP mcphttp.Config
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Defaults returns the default Config (Backend and ShareDir unset).
func Defaults() Config {
	return Config{
		OpenTimeout:        2 * time.Minute,
		RunTimeout:         60 * time.Second,
		IdleTTL:            15 * time.Minute,
		SessionTTL:         24 * time.Hour,
		MaxSandboxes:       8,
		MaxPerPrincipal:    2,
		MaxBrowserSessions: 1000,
		MaxRequestBytes:    1 << 20,
		MaxShareBytes:      64 << 10,
		MaxShareStoreBytes: 256 << 20,
		SharesPerMinute:    10,
		MaxFiles:           50,
		HTTP:               mcphttp.Config{MaxConns: mcphttp.DefaultMaxConns},
	}
}

// Validate reports the first field out of range, naming it (Backend is
// New's to check: a main validates its flags before building one).
func (c Config) Validate() error {
	if c.ShareDir == "" {
		return errors.New("playground: Config.ShareDir is required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"OpenTimeout", c.OpenTimeout}, {"RunTimeout", c.RunTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("playground: Config.%s %s: must be positive", d.name, d.v)
		}
	}
	if c.SessionTTL <= 0 || c.SessionTTL < c.IdleTTL {
		return fmt.Errorf("playground: Config.SessionTTL %s: must be positive and at least IdleTTL (%s)", c.SessionTTL, c.IdleTTL)
	}
	if c.IdleTTL < 0 || c.MaxSandboxes < 0 || c.MaxPerPrincipal < 0 {
		return fmt.Errorf("playground: IdleTTL, MaxSandboxes and MaxPerPrincipal must not be negative (0: no bound)")
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"MaxBrowserSessions", int64(c.MaxBrowserSessions)}, {"MaxRequestBytes", c.MaxRequestBytes},
		{"MaxShareBytes", c.MaxShareBytes}, {"MaxShareStoreBytes", c.MaxShareStoreBytes},
		{"SharesPerMinute", int64(c.SharesPerMinute)}, {"MaxFiles", int64(c.MaxFiles)}} {
		if n.v <= 0 {
			return fmt.Errorf("playground: Config.%s %d: must be positive", n.name, n.v)
		}
	}
	return c.HTTP.Validate()
}
