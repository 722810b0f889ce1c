package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProbes: the metrics listener answers the Deployment's probes;
// /readyz turns 503 once the server stops taking calls, /healthz stays 200.
func TestProbes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	ready.Store(true)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	stop := serveMetrics(ln, metrics, ready.Load, slog.New(slog.DiscardHandler))
	defer stop()
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{{"/healthz", 200, "ok"}, {"/readyz", 200, "ok"}, {"/metrics", 200, "m 1"}, {"/other", 404, ""}} {
		if code, body := get(c.path); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s = %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}
	ready.Store(false)
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("GET /readyz while shutting down = %d %q, want 503", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("GET /healthz while shutting down = %d, want 200", code)
	}
}
