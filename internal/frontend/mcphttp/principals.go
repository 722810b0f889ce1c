package mcphttp

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Principals: the identities a bearer token stands for. Each sandbox
// handle belongs to one (goruntime.HandleBackend's owner); the go-sdk
// hands a request's principal to tool handlers as its TokenInfo.UserID.

// The principals that are no token file's: the tokens file may not name
// them, so no token stands for another way in.
const (
	// DefaultPrincipal is the name of the one principal of a single
	// token (Config.Token: --auth-token-file or $GORUNTIME_MCP_TOKEN).
	DefaultPrincipal = "default"
	// StdioPrincipal is the one principal of a server over stdio.
	StdioPrincipal = "stdio"
	// AnonymousPrincipal is every caller's over HTTP without a token.
	AnonymousPrincipal = "anonymous"
)

// Principal is a named bearer token.
type Principal struct {
	Name  string
	Token string
}

// minTokenFileToken is the shortest token a tokens file may give.
const minTokenFileToken = 16

// ReadTokensFile reads a tokens file: one principal a line as
// "name:token" (the token is everything after the first colon, trimmed;
// at least 16 bytes), blank lines and lines starting with # skipped.
// Names are handle owners (goruntime.CheckOwner, no colon) other than
// the reserved ones (DefaultPrincipal, StdioPrincipal,
// AnonymousPrincipal); a name or a token given twice is an error, as is a
// file with none. Errors name the
// line, never a token.
func ReadTokensFile(path string) ([]Principal, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens file: %w", err)
	}
	var out []Principal
	names, tokens := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok, ok := strings.Cut(line, ":")
		name, tok = strings.TrimSpace(name), strings.TrimSpace(tok)
		switch {
		case !ok:
			return nil, fmt.Errorf("tokens file %s line %d: want name:token", path, n)
		case goruntime.CheckOwner(name) != nil:
			return nil, fmt.Errorf("tokens file %s line %d: principal name %q: want 1 to %d bytes without spaces or control characters", path, n, name, goruntime.MaxOwnerLen)
		case name == DefaultPrincipal || name == StdioPrincipal || name == AnonymousPrincipal:
			return nil, fmt.Errorf("tokens file %s line %d: principal name %q is reserved (%s: the single --auth-token-file token, %s: stdio, %s: HTTP without auth)",
				path, n, name, DefaultPrincipal, StdioPrincipal, AnonymousPrincipal)
		case len(tok) < minTokenFileToken:
			return nil, fmt.Errorf("tokens file %s line %d: the token of %s is shorter than %d bytes", path, n, name, minTokenFileToken)
		case names[name] != 0:
			return nil, fmt.Errorf("tokens file %s line %d: principal %s already named on line %d", path, n, name, names[name])
		case tokens[tok] != 0:
			return nil, fmt.Errorf("tokens file %s line %d: the token of %s is also line %d's (each principal needs its own)", path, n, name, tokens[tok])
		}
		names[name], tokens[tok] = n, n
		out = append(out, Principal{Name: name, Token: tok})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens file %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tokens file %s names no principal (want name:token lines)", path)
	}
	return out, nil
}

// principals is Config's tokens as one list: Config.Principals, and
// Config.Token as DefaultPrincipal.
func (c Config) principals() []Principal {
	ps := append([]Principal(nil), c.Principals...)
	if c.Token != "" {
		ps = append(ps, Principal{Name: DefaultPrincipal, Token: c.Token})
	}
	return ps
}

// CountPrincipals is how many principals Config's tokens stand for:
// Config.Principals, and Config.Token as DefaultPrincipal. 0: auth is
// off, and every caller is AnonymousPrincipal.
func (c Config) CountPrincipals() int { return len(c.principals()) }

// match returns the principal whose token is got, comparing with every
// one in constant time (no early exit), or "".
func match(ps []Principal, got string) string {
	name := ""
	for _, p := range ps {
		if subtle.ConstantTimeCompare([]byte(got), []byte(p.Token)) == 1 {
			name = p.Name
		}
	}
	return name
}
