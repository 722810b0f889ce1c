package mcphttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// serve runs a real MCP server (one tool, echo) behind the guard on a
// loopback listener.
func serve(t *testing.T, cfg Config) *httptest.Server {
	return serveOpts(t, cfg, nil)
}

func serveOpts(t *testing.T, cfg Config, opts *mcp.StreamableHTTPOptions) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "guard-test", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	h, err := Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// post sends an initialize request with the given headers and returns
// the status.
func post(t *testing.T, url string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(initBody))
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

// headerTransport adds headers to every request of a real MCP client.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callEcho connects a real MCP client (with extra headers) and calls the
// tool; it returns the connect or call error.
func callEcho(t *testing.T, url string, headers map[string]string) error {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	ctx := context.Background()
	sess, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headerTransport(headers)}}, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		return err
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hi" {
		t.Errorf("echo returned %q", got)
	}
	return nil
}

func TestOrigin(t *testing.T) {
	ts := serve(t, Config{AllowedOrigins: []string{"http://localhost:6274"}})
	if err := callEcho(t, ts.URL, nil); err != nil {
		t.Errorf("client without Origin: %v", err)
	}
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"https://evil.example:443", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://localhost:6275", http.StatusForbidden},
		{"http://localhost:6274", http.StatusOK},
		{ts.URL, http.StatusOK}, // the server's own origin (127.0.0.1:port)
	} {
		if got := post(t, ts.URL, map[string]string{"Origin": c.origin}); got != c.want {
			t.Errorf("POST with Origin %s: %d, want %d", c.origin, got, c.want)
		}
	}
	// GET (the server's event stream) is refused the same way.
	req, _ := http.NewRequest("GET", ts.URL, nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET with a foreign Origin: %d, want 403", resp.StatusCode)
	}
	if err := callEcho(t, ts.URL, map[string]string{"Origin": "http://evil.example"}); err == nil {
		t.Error("a real client sending a foreign Origin connected")
	}
}

// TestRebindingHost: the SDK's Host check stays in force behind the
// guard: a loopback listener refuses a request naming another host, even
// with a matching Origin (what a DNS-rebound page sends).
func TestRebindingHost(t *testing.T) {
	ts := serve(t, Config{})
	got := post(t, ts.URL, map[string]string{"Host": "evil.example:80", "Origin": "http://evil.example:80"})
	if got != http.StatusForbidden {
		t.Errorf("rebound Host: %d, want 403", got)
	}
}

func TestBearerToken(t *testing.T) {
	ts := serve(t, Config{Token: "s3cret-token"})
	for _, c := range []struct {
		name, auth string
		want       int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "Bearer nope", http.StatusUnauthorized},
		{"wrong scheme", "Basic czNjcmV0LXRva2Vu", http.StatusUnauthorized},
		{"right", "Bearer s3cret-token", http.StatusOK},
	} {
		h := map[string]string{}
		if c.auth != "" {
			h["Authorization"] = c.auth
		}
		if got := post(t, ts.URL, h); got != c.want {
			t.Errorf("%s token: %d, want %d", c.name, got, c.want)
		}
	}
	if err := callEcho(t, ts.URL, nil); err == nil {
		t.Error("a client without the token connected")
	}
	if err := callEcho(t, ts.URL, map[string]string{"Authorization": "Bearer s3cret-token"}); err != nil {
		t.Errorf("client with the token: %v", err)
	}
	// A foreign Origin is refused before the token is even looked at.
	if got := post(t, ts.URL, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer s3cret-token"}); got != http.StatusForbidden {
		t.Errorf("foreign Origin with the right token: %d, want 403", got)
	}
}

// TestBodyCapBehindGuard: the SDK's request body cap still answers 413
// behind the guard (and the guard does not buffer bodies).
func TestBodyCapBehindGuard(t *testing.T) {
	ts := serveOpts(t, Config{Token: "t"}, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("4 KiB body over a 1 KiB cap: %d, want 413", resp.StatusCode)
	}
	if got := post(t, ts.URL, map[string]string{"Authorization": "Bearer t"}); got != http.StatusOK {
		t.Errorf("small body: %d", got)
	}
}

func TestReadToken(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	if tok, err := ReadToken("", noEnv); tok != "" || err != nil {
		t.Errorf("no file, no env: %q %v", tok, err)
	}
	env := func(string) (string, bool) { return " from-env\n", true }
	if tok, _ := ReadToken("", env); tok != "from-env" {
		t.Errorf("env token %q", tok)
	}
	f := t.TempDir() + "/tok"
	if _, err := ReadToken(f, noEnv); err == nil {
		t.Error("missing token file: no error")
	}
	if err := writeFile(f, "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(f, noEnv); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty token file: %v", err)
	}
	if err := writeFile(f, "tok-from-file\n"); err != nil {
		t.Fatal(err)
	}
	if tok, _ := ReadToken(f, env); tok != "tok-from-file" {
		t.Errorf("file token %q (the file wins over the env)", tok)
	}
	if err := (Config{AllowedOrigins: []string{"localhost:6274"}}).Validate(); err == nil {
		t.Error("origin without scheme accepted")
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }
