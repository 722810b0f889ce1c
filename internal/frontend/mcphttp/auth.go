package mcphttp

import (
	"fmt"
	"net"
)

// The front ends' auth flags, one home for their reading and their
// warning: mcp-server and the playground take the same two.

// ReadAuth sets c.Token from tokenFile (--auth-token-file; "" reads
// $GORUNTIME_MCP_TOKEN through lookupEnv, and a nil lookupEnv reads no
// variable) and c.Principals from tokensFile (--auth-tokens-file; ""
// sets none). Its errors name the flag whose file failed.
func (c *Config) ReadAuth(tokenFile, tokensFile string, lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	tok, err := ReadToken(tokenFile, lookupEnv)
	if err != nil {
		return fmt.Errorf("--auth-token-file: %w", err)
	}
	c.Token = tok
	if tokensFile == "" {
		return nil
	}
	ps, err := ReadTokensFile(tokensFile)
	if err != nil {
		return fmt.Errorf("--auth-tokens-file: %w", err)
	}
	c.Principals = ps
	return nil
}

// Unguarded reports whether a server of c listening at addr lets in
// anyone who reaches it: no token and an address beyond loopback. The
// front ends warn then (UnguardedWarning).
func (c Config) Unguarded(addr net.Addr) bool {
	if c.CountPrincipals() > 0 {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

// UnguardedWarning is what a front end logs when Unguarded holds.
const UnguardedWarning = "serving beyond loopback without a bearer token: anyone who reaches this address can run code in a sandbox, and every caller shares one principal's sandboxes (set --auth-token-file or --auth-tokens-file)"
