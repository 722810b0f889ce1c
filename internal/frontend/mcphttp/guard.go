// Package mcphttp guards the MCP Streamable HTTP endpoint of
// cmd/mcp-server: it refuses browser requests from origins that are not
// allowed (403) and optionally requires a bearer token (401), closing the
// connection of a refused request; and it sets the HTTP server's limits
// on connections (server.go). The go-sdk
// handler behind it keeps its own Host check against DNS rebinding and
// its request body cap (413, StreamableHTTPOptions.MaxRequestBodyBytes).
// docs/mcp.md has the threat model.
package mcphttp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// TokenEnv is the environment variable that may hold the bearer token
// (the --auth-token-file flag takes precedence).
const TokenEnv = "GORUNTIME_MCP_TOKEN"

// Config says what the guard lets through.
type Config struct {
	// AllowedOrigins are origins ("http://localhost:6274") browsers may
	// call from besides the server's own (an Origin whose host:port is
	// the request's Host). A request with any other Origin header gets
	// 403; one without an Origin header (not from a browser) passes.
	AllowedOrigins []string
	// Token, when not empty, must be sent as "Authorization: Bearer
	// <Token>"; a missing or wrong token gets 401. It stands for the
	// principal DefaultPrincipal.
	Token string
	// Principals are named tokens (ReadTokensFile), accepted beside
	// Token: a request's principal is the name of the token it sent,
	// handed to the MCP handler as auth.TokenInfo.UserID.
	Principals []Principal
	// MaxConns caps the connections the server holds at once (Listen);
	// 0 means DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a connection that waits this long for its next
	// request (NewServer); 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// BodyTimeout bounds reading one request's body (NewServer); 0
	// means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Logger receives refused requests (401, 403) and the server's own
	// errors, at most ratelog.OutsideBurst a minute each and a summary
	// of the rest; nil logs neither.
	Logger *slog.Logger
}

// Validate checks the allowed origins' shape (scheme://host[:port]) and
// that MaxConns and IdleTimeout are not negative.
func (c Config) Validate() error {
	if c.MaxConns < 0 {
		return fmt.Errorf("max connections %d: must not be negative (0 means the default, %d)", c.MaxConns, DefaultMaxConns)
	}
	if c.BodyTimeout < 0 {
		return fmt.Errorf("body timeout %s: must not be negative (0 means the default, %s)", c.BodyTimeout, DefaultBodyTimeout)
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("idle timeout %s: must not be negative (0 means the default, %s)", c.IdleTimeout, DefaultIdleTimeout)
	}
	for _, o := range c.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("allowed origin %q: want scheme://host[:port], e.g. http://localhost:6274", o)
		}
	}
	return nil
}

// ReadToken reads a bearer token from file (trimmed; it must not be
// empty), or from $GORUNTIME_MCP_TOKEN when file is "". No file and no
// variable: "" (auth off).
func ReadToken(file string, lookupEnv func(string) (string, bool)) (string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read auth token: %w", err)
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", fmt.Errorf("auth token file %s is empty", file)
		}
		return tok, nil
	}
	if v, ok := lookupEnv(TokenEnv); ok {
		if tok := strings.TrimSpace(v); tok != "" {
			return tok, nil
		}
		return "", fmt.Errorf("$%s is set but empty", TokenEnv)
	}
	return "", nil
}

// Handler wraps h: Origin check (403), then bearer token (401, when
// cfg.Token is set), then h. A refusal (401 or 403, from any of them)
// closes its connection and is logged to cfg.Logger at a bounded rate.
func Handler(h http.Handler, cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	next := h
	if ps := cfg.principals(); len(ps) > 0 {
		verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
			name := match(ps, got)
			if name == "" {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: name, Expiration: time.Now().Add(time.Hour)}, nil
		}
		next = auth.RequireBearerToken(verify, nil)(next)
	}
	// Browsers: the standard library's check for unsafe methods (it reads
	// Sec-Fetch-Site as well as Origin), and ours for every method (the
	// MCP spec wants 403 for any present, not-allowed Origin, GET's event
	// stream included).
	cop := http.NewCrossOriginProtection()
	allowed := map[string]bool{}
	for _, o := range cfg.AllowedOrigins {
		o = strings.TrimSuffix(o, "/")
		allowed[o] = true
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
	}
	protected := cop.Handler(next)
	return refusing(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, r.Host, allowed) {
			http.Error(w, fmt.Sprintf("Forbidden: origin %q is not allowed (allow it with --allowed-origin)", origin), http.StatusForbidden)
			return
		}
		protected.ServeHTTP(w, r)
	}), cfg.Logger), nil
}

// originAllowed: listed, or the server's own origin: its host:port is
// the request's Host and names the server by an IP address or localhost.
// A DNS name does not count as "own": after DNS rebinding, a page from
// evil.example reaches this server with Host and Origin both
// evil.example.
func originAllowed(origin, host string, allowed map[string]bool) bool {
	if allowed[origin] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, host) {
		return false
	}
	name := u.Hostname()
	return strings.EqualFold(name, "localhost") || net.ParseIP(name) != nil
}
