package mcphttp

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", " s3cret-token\n")
	tokensFile := write("tokens", "alice:0123456789abcdef0123\n")
	env := func(k string) (string, bool) {
		if k == TokenEnv {
			return "from-env", true
		}
		return "", false
	}

	var c Config
	if err := c.ReadAuth(tokenFile, tokensFile, env); err != nil {
		t.Fatal(err)
	}
	if c.Token != "s3cret-token" || len(c.Principals) != 1 || c.Principals[0].Name != "alice" {
		t.Fatalf("ReadAuth(files) = token %q, principals %v", c.Token, c.Principals)
	}

	c = Config{}
	if err := c.ReadAuth("", "", env); err != nil || c.Token != "from-env" {
		t.Fatalf("ReadAuth with $%s: token %q, err %v; want the variable's", TokenEnv, c.Token, err)
	}
	c = Config{}
	if err := c.ReadAuth("", "", nil); err != nil || c.Token != "" {
		t.Fatalf("ReadAuth without a variable reader: token %q, err %v; want none", c.Token, err)
	}

	for _, tc := range []struct{ token, tokens, flag string }{
		{filepath.Join(dir, "missing"), "", "--auth-token-file"},
		{write("empty", "\n"), "", "--auth-token-file"},
		{"", write("bad", "alice:short\n"), "--auth-tokens-file"},
	} {
		c = Config{}
		err := c.ReadAuth(tc.token, tc.tokens, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.flag+": ") {
			t.Errorf("ReadAuth(%q, %q) = %v, want an error naming %s", tc.token, tc.tokens, err, tc.flag)
		}
	}
}

func TestUnguarded(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 1}
	for _, tc := range []struct {
		c    Config
		addr net.Addr
		want bool
	}{
		{Config{}, loop, false},
		{Config{}, any, true},
		{Config{Token: "t"}, any, false},
		{Config{Principals: []Principal{{Name: "a", Token: "t"}}}, any, false},
	} {
		if got := tc.c.Unguarded(tc.addr); got != tc.want {
			t.Errorf("Config{Token:%q, %d principals}.Unguarded(%v) = %v, want %v", tc.c.Token, len(tc.c.Principals), tc.addr, got, tc.want)
		}
	}
}
