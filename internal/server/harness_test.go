package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// testServer is a Server behind a real HTTP listener on loopback.
type testServer struct {
	*Server
	URL  string
	Base string // the base directory
	Logs *lockedWriter
}

// startServer serves a fresh base directory on 127.0.0.1. Reaping stays
// off in-process (the test binary starts children of its own); the
// process tests cover it on the built binary.
func startServer(t testing.TB, mutate func(*Config)) *testServer {
	t.Helper()
	base := t.TempDir()
	logs := &lockedWriter{}
	cfg := Config{
		BaseDir:        base,
		ExecTimeout:    60 * time.Second,
		MaxOutputBytes: 8 << 20,
		MaxUploadBytes: 256 << 20,
		Environ:        os.Environ(),
		FallbackHome:   t.TempDir(),
		Log:            slog.New(slog.NewJSONHandler(logs, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &testServer{Server: s, URL: hs.URL, Base: s.root().Dir(), Logs: logs}
}

// lockedWriter serialises log writes from concurrent requests.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// exec posts body (marshalled to JSON) to /execute and decodes a 200 answer.
func (ts *testServer) exec(t testing.TB, body any) wire.ExecuteResponse {
	t.Helper()
	code, raw := ts.post(t, "/execute", "application/json", mustJSON(t, body))
	if code != http.StatusOK {
		t.Fatalf("POST /execute %s: status %d, body %s", mustJSON(t, body), code, raw)
	}
	var res wire.ExecuteResponse
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("decode /execute answer %q: %v", raw, err)
	}
	return res
}

func (ts *testServer) run(t testing.TB, command string) wire.ExecuteResponse {
	t.Helper()
	return ts.exec(t, map[string]any{"command": command})
}

func (ts *testServer) post(t testing.TB, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(ts.URL+path, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read POST %s answer: %v", path, err)
	}
	return resp.StatusCode, raw
}

// get sends a GET for the raw (already escaped) path.
func (ts *testServer) get(t testing.TB, rawPath string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = "//" + req.URL.Host + rawPath // sent exactly as written
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawPath, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read GET %s answer: %v", rawPath, err)
	}
	return resp.StatusCode, raw
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
