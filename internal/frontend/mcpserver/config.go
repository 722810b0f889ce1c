package mcpserver

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Config configures a Server. A zero duration means unset and takes the
// default named on its field (Defaults has them all); IdleTTL,
// MaxSandboxes and MaxSandboxesPerPrincipal have no unset value: 0 means
// never and no limit, here and on the command line alike.
type Config struct {
	// Backend provisions the sandboxes. Required.
	Backend goruntime.Backend
	// Logger receives the server's logs; nil discards them. It must not
	// write to the stdio transport's stdout.
	Logger *slog.Logger
	// Version is reported to clients as the server's version.
	Version string

	// OpenTimeout bounds opening (or attaching to) a sandbox; default 5 min.
	OpenTimeout time.Duration
	// DefaultTimeout is a command's time limit when the call gives none;
	// default 60 s.
	DefaultTimeout time.Duration
	// MaxTimeout is the largest timeout_seconds a call may ask for;
	// default 10 min.
	MaxTimeout time.Duration
	// Ephemeral empties /app before every run_go_code call (the build and
	// module caches stay), so no call sees files from an earlier one.
	Ephemeral bool
	// Claim is the ID of a running sandbox to attach to instead of opening
	// a new one. Stdio only.
	Claim string
	// Persistent leaves the sandbox running when the server exits, to be
	// reattached with Claim. Stdio only.
	Persistent bool
	// OpenAtStart makes ServeStdio open the process's sandbox in the
	// background as it starts serving, so the first tool call finds it
	// ready instead of waiting for it. Meant for backends where an idle
	// sandbox costs little (local: a claim from its warm pool); a call
	// arriving while the open runs waits for it and gets its progress.
	// Ignored with Claim, which attaches before serving.
	OpenAtStart bool

	// IdleTTL closes an HTTP session's sandbox after it has run no tool
	// call for this long, and ends MCP sessions idle for this long
	// (Defaults: 30 min). 0 means never.
	IdleTTL time.Duration
	// MaxSandboxes bounds the sandboxes at once: those the sessions hold
	// and the backend's live handles of every principal (create_sandbox;
	// counted in the backend, so with replicas it bounds their handles
	// together, each replica's sessions apart). A session's first call or
	// a create past it is refused. Checked before each open: replicas
	// creating at the same instant may pass it by one each (Defaults:
	// 16). 0 means no limit.
	MaxSandboxes int
	// MaxSandboxesPerPrincipal bounds the sandboxes one principal holds
	// at once: its MCP sessions' (each counts against the principal whose
	// call opened it, until it closes) and its handles (create_sandbox,
	// and a stateless call's), so that one principal cannot lock the
	// others out. 0 means no limit. PerPrincipalAuto (Defaults) means:
	// with two or more principals (HTTP.Principals, HTTP.Token), half of
	// MaxSandboxes, at least 1 (8 when MaxSandboxes is 0); with one, no
	// bound of its own (New sets the number, autoShare). At most
	// MaxSandboxes when both are set. Handles are counted in the backend
	// and sessions in this process: with replicas, a principal's sessions
	// on each replica count apart, and replicas creating at the same
	// instant may pass it by one each.
	MaxSandboxesPerPrincipal int

	// Stateless serves Streamable HTTP without MCP sessions (go-sdk's
	// StreamableHTTPOptions.Stateless): MCP 2026-07-28 clients natively,
	// older ones too. No session holds a sandbox: a call names a handle
	// with sandbox_id, and run_go_code or check_go_code without one makes
	// a new handle and names it in the result. Needs a backend with
	// handles (goruntime.HandleBackend: local, agent-sandbox). HTTP only.
	Stateless bool
	// MaxTTL caps a sandbox handle's idle TTL (create_sandbox's
	// ttl_seconds); handles get min(30 min, MaxTTL) by default
	// (Defaults: 24 h).
	MaxTTL time.Duration
	// EventStoreBytes bounds the memory that keeps HTTP streams' events
	// for clients that reconnect with Last-Event-ID (go-sdk's
	// MemoryEventStore; Defaults: 16 MiB). Resumption needs the same
	// process: a stateless server behind replicas does not resume.
	EventStoreBytes int

	// SSECloseAfter closes the event stream of a tool call still running
	// after this long, over stateful HTTP, with an SSE retry field: the
	// client reconnects with Last-Event-ID and gets the rest, the result
	// included, from the event store (SEP-1699 polling). It is closed
	// again each time this long passes if the call sent an event since
	// (progress), so such a call's responses never outlast a proxy's
	// timeout. Only for clients speaking 2025-11-25 (older ones cannot
	// resume; 2026-07-28 has no streams to resume). Defaults: 30 s; 0
	// means never.
	SSECloseAfter time.Duration

	// ProgressInterval is how often run_go_code sends a progress
	// notification while a command runs, when the client asked for
	// progress; default 1 s.
	ProgressInterval time.Duration
	// Session tunes the sessions' output window and defaults; see
	// goruntime.Options. Session.DefaultTimeout is set from DefaultTimeout.
	Session goruntime.Options

	// HTTP guards the Streamable HTTP endpoint: allowed browser origins
	// and the optional bearer token (internal/frontend/mcphttp).
	HTTP mcphttp.Config
	// MaxRequestBytes caps one request, in bytes: an HTTP request body
	// (413 past it) and a stdio message, one line not counting its
	// newline (past it the line is dropped unread and a request gets a
	// JSON-RPC error -32600 with its id; the session goes on). 0 means
	// the default, 4 MiB.
	MaxRequestBytes int64
}

const (
	defaultOpenTimeout      = 5 * time.Minute
	defaultCommandTimeout   = 60 * time.Second
	defaultMaxTimeout       = 10 * time.Minute
	defaultIdleTTL          = 30 * time.Minute
	defaultMaxSandboxes     = 16
	defaultProgressInterval = time.Second
	defaultMaxRequestBytes  = 4 << 20
	defaultMaxTTL           = 24 * time.Hour
	defaultEventStoreBytes  = 16 << 20
	defaultSSECloseAfter    = 30 * time.Second
)

// Defaults returns a Config with every default set (and no Backend).
func Defaults() Config {
	return Config{
		OpenTimeout:              defaultOpenTimeout,
		DefaultTimeout:           defaultCommandTimeout,
		MaxTimeout:               defaultMaxTimeout,
		IdleTTL:                  defaultIdleTTL,
		MaxSandboxes:             defaultMaxSandboxes,
		ProgressInterval:         defaultProgressInterval,
		MaxRequestBytes:          defaultMaxRequestBytes,
		MaxTTL:                   defaultMaxTTL,
		EventStoreBytes:          defaultEventStoreBytes,
		SSECloseAfter:            defaultSSECloseAfter,
		MaxSandboxesPerPrincipal: PerPrincipalAuto,
		HTTP:                     mcphttp.Config{MaxConns: mcphttp.DefaultMaxConns},
	}
}

// RegisterFlags registers the flags that set c's fields on fs, each
// defaulting to c's current value (start from Defaults): --open-timeout,
// --timeout, --max-timeout, --idle-ttl, --max-sandboxes,
// --sse-close-after, --ephemeral, --claim, --persistent, --stateless,
// --max-ttl, --max-sandboxes-per-principal, --allowed-origin,
// --max-request-mb and --max-connections. The bearer token comes from a
// file or the environment (mcphttp.ReadToken), not a flag value. Check
// the result with Validate.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Claim, "claim", c.Claim, "stdio: attach to this running sandbox (an ID printed by an earlier --persistent run) at startup instead of opening a new one; exit 1 if it cannot")
	fs.BoolVar(&c.Persistent, "persistent", c.Persistent, "stdio: leave the sandbox running on exit and log its ID for --claim")
	fs.BoolVar(&c.Ephemeral, "ephemeral", c.Ephemeral, "empty /app before every run_go_code call (build and module caches stay)")
	fs.DurationVar(&c.OpenTimeout, "open-timeout", c.OpenTimeout, "how long to wait for a sandbox to start (the local backend's never waits for its seed build cache: one opened while it builds compiles what it needs itself)")
	fs.DurationVar(&c.DefaultTimeout, "timeout", c.DefaultTimeout, "a command's time limit when the call gives no timeout_seconds")
	fs.DurationVar(&c.MaxTimeout, "max-timeout", c.MaxTimeout, "the largest timeout_seconds a call may ask for")
	fs.DurationVar(&c.IdleTTL, "idle-ttl", c.IdleTTL, "http: close a session's sandbox after this long without a tool call, and end MCP sessions idle this long (0: never)")
	fs.IntVar(&c.MaxSandboxes, "max-sandboxes", c.MaxSandboxes, "most sandboxes at once: the HTTP sessions' own and every principal's create_sandbox sandboxes in the backend (shared by replicas and restarts); past it a session's first call or create_sandbox is refused (0: no limit)")
	fs.DurationVar(&c.SSECloseAfter, "sse-close-after", c.SSECloseAfter, "http: close the event stream of a tool call still running after this long (and again each time it passes, when the call sent progress since), asking the client to reconnect (SSE retry) and resume from the server's event store, so responses do not outlast a proxy's timeout; for MCP 2025-11-25 clients (0: never)")
	fs.BoolVar(&c.Stateless, "stateless", c.Stateless, "http: serve without MCP sessions (MCP 2026-07-28 natively, older clients too), so any replica can serve any call: no session keeps a sandbox; calls name one with sandbox_id (create_sandbox), and run_go_code or check_go_code without it make a new one and return its sandbox_id")
	fs.DurationVar(&c.MaxTTL, "max-ttl", c.MaxTTL, "the longest idle TTL create_sandbox's ttl_seconds may ask for; a sandbox ends once unused this long (default TTL: 30m or this, the shorter)")
	fs.Var(shareFlag{&c.MaxSandboxesPerPrincipal}, "max-sandboxes-per-principal", fmt.Sprintf("most sandboxes (a `number`, or auto) one principal (an auth token's name) holds at once, its MCP sessions' and create_sandbox's (and stateless calls') together; past it its next one is refused with an error naming this flag, while other principals keep theirs. auto: with two or more principals (--auth-tokens-file, --auth-token-file) half of --max-sandboxes, at least 1 (%d when --max-sandboxes=0), so no principal can take the whole server; with one principal (stdio, no auth, a single token) no bound but --max-sandboxes. 0: no limit; a number may not exceed --max-sandboxes", autoFallbackShare))
	fs.Func("allowed-origin", "http: a browser origin (scheme://host[:port]) allowed to call besides the server's own; repeatable. Requests with any other Origin header get 403", func(v string) error {
		c.HTTP.AllowedOrigins = append(c.HTTP.AllowedOrigins, strings.TrimSuffix(v, "/"))
		return nil
	})
	fs.IntVar(&c.HTTP.MaxConns, "max-connections", c.HTTP.MaxConns, "http: most connections held at once (authenticated or not; an MCP session holds one to three); more wait in the listen queue until one closes. Idle connections close after "+mcphttp.DefaultIdleTimeout.String()+", refused ones (401, 403) at once")
	fs.Func("max-request-mb", fmt.Sprintf("largest request, MiB: an HTTP request body (413 past it) or a stdio message line (a JSON-RPC error naming this flag past it; the session goes on). It bounds the files one run_go_code call can carry (default %d)", c.MaxRequestBytes>>20), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > 1<<20 {
			return fmt.Errorf("--max-request-mb=%s: must be positive (MiB, at most 1048576)", v)
		}
		c.MaxRequestBytes = n << 20
		return nil
	})
}

// Validate is the one check of a Config's values, named by their flags:
// timeouts must be positive (set: New fills unset ones from Defaults
// first), --max-timeout at least --timeout, --idle-ttl and
// --max-sandboxes not negative, --max-sandboxes-per-principal a
// number or auto and at most --max-sandboxes, --claim without
// surrounding spaces, every --allowed-origin a scheme://host[:port].
func (c Config) Validate() error {
	switch {
	case strings.TrimSpace(c.Claim) != c.Claim:
		return fmt.Errorf("--claim=%q: the ID has surrounding spaces", c.Claim)
	case c.OpenTimeout <= 0:
		return fmt.Errorf("--open-timeout=%s: must be positive", c.OpenTimeout)
	case c.DefaultTimeout <= 0:
		return fmt.Errorf("--timeout=%s: must be positive", c.DefaultTimeout)
	case c.MaxTimeout < c.DefaultTimeout:
		return fmt.Errorf("--max-timeout=%s is below --timeout=%s", c.MaxTimeout, c.DefaultTimeout)
	case c.SSECloseAfter < 0:
		return fmt.Errorf("--sse-close-after=%s: must not be negative (0 means never)", c.SSECloseAfter)
	case c.IdleTTL < 0:
		return fmt.Errorf("--idle-ttl=%s: must not be negative (0 means never)", c.IdleTTL)
	case c.MaxSandboxes < 0:
		return fmt.Errorf("--max-sandboxes=%d: must not be negative (0 means no limit)", c.MaxSandboxes)
	case c.ProgressInterval < 0:
		return fmt.Errorf("progress interval %s: must be positive", c.ProgressInterval)
	case c.MaxTTL < goruntime.MinHandleTTL:
		return fmt.Errorf("--max-ttl=%s: must be at least %s", c.MaxTTL, goruntime.MinHandleTTL)
	case c.MaxSandboxesPerPrincipal < PerPrincipalAuto:
		return fmt.Errorf("--max-sandboxes-per-principal=%d: must not be negative (0 means no limit, auto the default share)", c.MaxSandboxesPerPrincipal)
	case c.MaxSandboxes > 0 && c.MaxSandboxesPerPrincipal > c.MaxSandboxes:
		return fmt.Errorf("--max-sandboxes-per-principal=%d is above --max-sandboxes=%d: no principal could hold that many; set it to at most %d, or auto (the default share)",
			c.MaxSandboxesPerPrincipal, c.MaxSandboxes, c.MaxSandboxes)
	case c.EventStoreBytes < 0:
		return fmt.Errorf("event store bytes %d: must not be negative", c.EventStoreBytes)
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("--max-request-mb=%d: must be positive", c.MaxRequestBytes>>20)
	}
	if err := c.HTTP.Validate(); err != nil {
		return fmt.Errorf("--allowed-origin or --max-connections: %w", err)
	}
	return nil
}

// withDefaults fills what is unset (nil Logger, empty Version, zero
// durations other than IdleTTL, zero MaxRequestBytes), validates the
// result and sets the auto share (MaxSandboxesPerPrincipal).
func (c Config) withDefaults() (Config, error) {
	if c.Backend == nil {
		return c, errors.New("mcpserver: Config.Backend is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	d := Defaults()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.OpenTimeout, &d.OpenTimeout}, {&c.DefaultTimeout, &d.DefaultTimeout},
		{&c.MaxTimeout, &d.MaxTimeout}, {&c.ProgressInterval, &d.ProgressInterval}, {&c.MaxTTL, &d.MaxTTL},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.EventStoreBytes == 0 {
		c.EventStoreBytes = d.EventStoreBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = d.MaxRequestBytes
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if c.MaxSandboxesPerPrincipal == PerPrincipalAuto {
		c.MaxSandboxesPerPrincipal = c.autoShare()
	}
	c.Session.DefaultTimeout = c.DefaultTimeout
	if c.Session.Logger == nil {
		c.Session.Logger = c.Logger
	}
	return c, nil
}
