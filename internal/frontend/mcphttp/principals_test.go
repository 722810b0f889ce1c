package mcphttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

func TestReadTokensFile(t *testing.T) {
	f := t.TempDir() + "/tokens"
	good := "# team tokens\nalice: alice-token-0123456789\n\nbob:bob:token:with:colons-0123\n"
	if err := writeFile(f, good); err != nil {
		t.Fatal(err)
	}
	ps, err := ReadTokensFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0] != (Principal{"alice", "alice-token-0123456789"}) || ps[1] != (Principal{"bob", "bob:token:with:colons-0123"}) {
		t.Fatalf("principals %+v", ps)
	}
	for _, tc := range []struct{ body, want string }{
		{"", "names no principal"},
		{"# only a comment\n", "names no principal"},
		{"alice\n", "line 1: want name:token"},
		{"alice:short\n", "line 1: the token of alice is shorter than 16 bytes"},
		{"al ice:alice-token-0123456789\n", "line 1: principal name"},
		{":alice-token-0123456789\n", "line 1: principal name"},
		{"alice:alice-token-0123456789\nalice:other-token-0123456789\n", "line 2: principal alice already named on line 1"},
		{"stdio:stdio-token-0123456789\n", `line 1: principal name "stdio" is reserved`},
		{"anonymous:anon-token-0123456789\n", `line 1: principal name "anonymous" is reserved`},
		{"default:default-token-0123456\n", `line 1: principal name "default" is reserved`},
		{"alice:same-token-0123456789\nbob:same-token-0123456789\n", "line 2: the token of bob is also line 1's"},
	} {
		if err := writeFile(f, tc.body); err != nil {
			t.Fatal(err)
		}
		_, err := ReadTokensFile(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
		if err != nil && strings.Contains(tc.body, "token-0123456789") && strings.Contains(err.Error(), "token-0123456789") {
			t.Errorf("%q: the error shows a token: %v", tc.body, err)
		}
	}
	if _, err := ReadTokensFile(t.TempDir() + "/missing"); err == nil {
		t.Error("missing tokens file: no error")
	}
}

// Each token maps to its principal's name, handed on as
// auth.TokenInfo.UserID; the single token is DefaultPrincipal.
func TestPrincipalOfToken(t *testing.T) {
	var got string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			got = ti.UserID
		}
	})
	h, err := Handler(inner, Config{Token: "single-token", Principals: []Principal{{"alice", "alice-token-0123456789"}, {"bob", "bob-token-0123456789ab"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, tc := range []struct {
		token, want string
		status      int
	}{
		{"alice-token-0123456789", "alice", 200},
		{"bob-token-0123456789ab", "bob", 200},
		{"single-token", DefaultPrincipal, 200},
		{"alice-token-012345678", "", 401},
		{"", "", 401},
	} {
		got = ""
		req, _ := http.NewRequestWithContext(context.Background(), "POST", ts.URL, strings.NewReader("{}"))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || got != tc.want {
			t.Errorf("token %q: status %d principal %q, want %d %q", tc.token, resp.StatusCode, got, tc.status, tc.want)
		}
	}
}
