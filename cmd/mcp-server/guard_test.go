package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
)

// TestHTTPGuard: the built binary over Streamable HTTP with
// --auth-token-file and --allowed-origin: a foreign Origin gets 403 (even
// with the token), a missing or wrong token 401, and the right token with
// no Origin, or an allowed one, is served.
func TestHTTPGuard(t *testing.T) {
	requireBwrap(t)
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("guard-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	srv, err := smoke.StartHTTP(context.Background(), serverBin, serverArgs(t, "--auth-token-file="+tokFile, "--allowed-origin=http://localhost:6274"), logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	defer srv.Stop()
	post := func(headers map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const good = "Bearer guard-test-token"
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"foreign origin", map[string]string{"Origin": "http://evil.example", "Authorization": good}, http.StatusForbidden},
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"token, no origin", map[string]string{"Authorization": good}, http.StatusOK},
		{"token, allowed origin", map[string]string{"Authorization": good, "Origin": "http://localhost:6274"}, http.StatusOK},
	} {
		if got := post(c.headers); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestHTTPGuardBadFlags(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http=127.0.0.1:0", "--auth-token-file=" + empty}, "is empty"},
		{[]string{"--http=127.0.0.1:0", "--auth-token-file=/nonexistent/token"}, "read auth token"},
		{[]string{"--allowed-origin=localhost:6274"}, "want scheme://host[:port]"},
		{[]string{"--max-request-mb=0"}, "--max-request-mb=0: must be positive"},
		{[]string{"--max-connections=-1"}, "max connections -1: must not be negative"},
		{[]string{"--max-connections=many"}, "invalid value \"many\" for flag -max-connections"},
		{[]string{"--relax=everything"}, "unknown protection"},
		{[]string{"--disk-mb=-1"}, "--disk-mb=-1: must not be negative"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), c.args, nil, nil, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to mention %q", c.args, code, stderr.String(), c.want)
		}
	}
}
