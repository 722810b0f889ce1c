package modproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/ratelog"
)

// fakeSource fills the cache as `go mod download` would, for the module
// versions it knows, and records what it was asked.
type fakeSource struct {
	cache    string
	versions map[string][]string // module -> versions it has
	delay    time.Duration

	mu    sync.Mutex
	calls []string
}

func (f *fakeSource) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeSource) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSource) has(mod, v string) bool {
	for _, x := range f.versions[mod] {
		if x == v {
			return true
		}
	}
	return false
}

func (f *fakeSource) Download(ctx context.Context, mod, v string) error {
	f.record("download " + mod + "@" + v)
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	if !f.has(mod, v) {
		return fmt.Errorf("%s@%s: reading https://proxy.example/%s/@v/%s.info: 404 Not Found", mod, v, mod, v)
	}
	esc := map[string]string{"github.com/BurntSushi/toml": "github.com/!burnt!sushi/toml"}[mod]
	if esc == "" {
		esc = mod
	}
	dir := filepath.Join(f.cache, "cache", "download", filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for ext, body := range map[string]string{
		".info": fmt.Sprintf(`{"Version":%q,"Time":"2024-01-02T03:04:05Z"}`, v),
		".mod":  "module " + mod + "\n",
		".zip":  "PK-zip-of-" + mod + "@" + v,
	} {
		if err := os.WriteFile(filepath.Join(dir, v+ext), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeSource) Versions(ctx context.Context, mod string) ([]string, error) {
	f.record("list " + mod)
	if vs, ok := f.versions[mod]; ok {
		return append(vs, "not-a-version"), nil
	}
	return nil, fmt.Errorf("module %s: 404 Not Found", mod)
}

func (f *fakeSource) Query(ctx context.Context, mod, q string) (Info, error) {
	f.record("query " + mod + "@" + q)
	vs, ok := f.versions[mod]
	if !ok || len(vs) == 0 {
		return Info{}, errors.New("no matching versions")
	}
	return Info{Version: vs[len(vs)-1], Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
}

var quiet = slog.New(slog.DiscardHandler)

func newTestProxy(t *testing.T, allow ...string) (*httptest.Server, *fakeSource) {
	t.Helper()
	src := &fakeSource{cache: t.TempDir(), versions: map[string][]string{
		"example.com/ok":             {"v1.0.0", "v1.1.0"},
		"example.com/ok/v2":          {"v2.0.0"},
		"github.com/BurntSushi/toml": {"v1.3.2"},
		"example.com/other":          {"v0.1.0"},
		"example.com/ok/sub/notamod": nil,
		"example.com/incompat":       {"v2.0.0+incompatible"},
	}}
	p, err := New(Config{Allow: allow, ModCache: src.cache, Source: src, FetchTimeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv, src
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

func TestServesAllowedModule(t *testing.T) {
	srv, src := newTestProxy(t, "example.com/ok", "github.com/BurntSushi/*", "example.com/incompat")
	cases := []struct {
		path, ctype, body string
	}{
		{"/example.com/ok/@v/list", "text/plain; charset=utf-8", "v1.0.0\nv1.1.0\n"},
		{"/example.com/ok/@latest", "application/json", `{"Version":"v1.1.0","Time":"2024-01-02T03:04:05Z"}`},
		{"/example.com/ok/@v/v1.0.0.info", "application/json", `{"Version":"v1.0.0","Time":"2024-01-02T03:04:05Z"}`},
		{"/example.com/ok/@v/v1.0.0.mod", "text/plain; charset=utf-8", "module example.com/ok\n"},
		{"/example.com/ok/@v/v1.0.0.zip", "application/zip", "PK-zip-of-example.com/ok@v1.0.0"},
		{"/example.com/ok/v2/@v/v2.0.0.mod", "text/plain; charset=utf-8", "module example.com/ok/v2\n"},
		// Upper case in module paths travels escaped (!b for B).
		{"/github.com/!burnt!sushi/toml/@v/v1.3.2.mod", "text/plain; charset=utf-8", "module github.com/BurntSushi/toml\n"},
		{"/example.com/incompat/@v/v2.0.0+incompatible.info", "application/json", `{"Version":"v2.0.0+incompatible","Time":"2024-01-02T03:04:05Z"}`},
		// A version query through .info resolves without a download.
		{"/example.com/ok/@v/master.info", "application/json", `{"Version":"v1.1.0","Time":"2024-01-02T03:04:05Z"}`},
	}
	for _, c := range cases {
		code, ctype, body := get(t, srv, c.path)
		if code != 200 || ctype != c.ctype || body != c.body {
			t.Errorf("GET %s = %d %q %q; want 200 %q %q", c.path, code, ctype, body, c.ctype, c.body)
		}
	}
	// The second request for a version is served from the cache.
	n := len(src.Calls())
	if code, _, _ := get(t, srv, "/example.com/ok/@v/v1.0.0.zip"); code != 200 {
		t.Fatalf("second GET: %d", code)
	}
	if got := src.Calls(); len(got) != n {
		t.Errorf("second GET of a cached version fetched again: %q", got[n:])
	}
}

func TestRefusesModuleOutsideAllowlist(t *testing.T) {
	srv, src := newTestProxy(t, "example.com/ok")
	for _, p := range []string{
		"/example.com/other/@v/list",
		"/example.com/other/@latest",
		"/example.com/other/@v/v0.1.0.info",
		"/example.com/other/@v/v0.1.0.zip",
		"/example.com/@v/list",      // a prefix of an allowed path is not allowed
		"/example.com/okay/@v/list", // patterns match whole elements
		"/github.com/foo/bar/baz/@v/list",
	} {
		code, ctype, body := get(t, srv, p)
		if code != http.StatusNotFound || !strings.HasPrefix(ctype, "text/plain") {
			t.Errorf("GET %s = %d %q; want 404 text/plain", p, code, ctype)
		}
		if !strings.Contains(body, "not in this sandbox's module allowlist") || !strings.Contains(body, "add a pattern: ") {
			t.Errorf("GET %s: body does not name the fix: %q", p, body)
		}
	}
	if _, _, body := get(t, srv, "/github.com/foo/bar/baz/@v/list"); !strings.Contains(body, "add a pattern: github.com/foo/bar\n") ||
		!strings.Contains(body, "(allowed: example.com/ok)") {
		t.Errorf("refusal does not suggest the repository's pattern and list the allowlist: %q", body)
	}
	if got := src.Calls(); len(got) != 0 {
		t.Errorf("refused requests reached the source: %q", got)
	}
	// The go command shows at most 8 lines of a response, up to the first blank one.
	_, _, body := get(t, srv, "/example.com/other/@v/list")
	if lines := strings.Split(strings.TrimSpace(body), "\n"); len(lines) > 8 || strings.Contains(body, "\n\n") {
		t.Errorf("refusal is not a short paragraph: %q", body)
	}
}

func TestEmptyAllowlistServesNothing(t *testing.T) {
	srv, src := newTestProxy(t)
	code, _, body := get(t, srv, "/example.com/ok/@v/list")
	if code != http.StatusNotFound || !strings.Contains(body, "(allowed: none)") {
		t.Errorf("GET with empty allowlist = %d %q", code, body)
	}
	if len(src.Calls()) != 0 {
		t.Errorf("source called: %q", src.Calls())
	}
}

func TestBadRequests(t *testing.T) {
	srv, src := newTestProxy(t, "*")
	for _, p := range []string{
		"/example.com/ok/@v/../../../../etc/passwd",
		"/example.com/ok/@v/..%2f..%2fetc%2fpasswd.info",
		"/../../etc/passwd/@v/list",
		"/example.com/../ok/@v/list",
		"/example.com/./ok/@v/list",
		"/example.com//ok/@v/list",
		"/example.com/OK/@v/list",       // upper case must be escaped
		"/example.com/ok/@v/V1.0.0.zip", // so must versions' upper case
		"/example.com/ok/@v/v1.0.zip",   // not canonical
		"/example.com/ok/@v/v1.0.0.exe", // not a proxy file
		"/example.com/ok/@v/master.zip", // a query is only resolved through .info
		"/example.com/ok/@v/v2.0.0.mod", // v2 needs a /v2 module path
		"/example.com/ok/@v/-x.info",    // would look like a flag
		"/example.com/ok/@v/a..b.info",
		"/example.com/ok",
		"/example.com/ok/@v/",
		"/-x/@v/list",
		"/" + strings.Repeat("a/", 600) + "@v/list",
	} {
		code, _, body := get(t, srv, p)
		if code != http.StatusBadRequest {
			t.Errorf("GET %s = %d %q; want 400", p, code, body)
		}
	}
	if got := src.Calls(); len(got) != 0 {
		t.Errorf("bad requests reached the source: %q", got)
	}
	resp, err := http.Post(srv.URL+"/example.com/ok/@v/list", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d; want 405", resp.StatusCode)
	}
}

func TestFetchFailuresAreNotFound(t *testing.T) {
	srv, _ := newTestProxy(t, "example.com/*")
	for p, want := range map[string]string{
		"/example.com/ok/@v/v1.9.0.zip":       "404 Not Found", // the source's error text
		"/example.com/missing/@v/list":        "404 Not Found",
		"/example.com/ok/sub/notamod/@latest": "no matching versions",
	} {
		code, _, body := get(t, srv, p)
		if code != http.StatusNotFound || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q; want 404 with %q", p, code, body, want)
		}
	}
}

func TestFetchTimeout(t *testing.T) {
	src := &fakeSource{cache: t.TempDir(), versions: map[string][]string{"example.com/slow": {"v1.0.0"}}, delay: time.Minute}
	p, err := New(Config{Allow: []string{"example.com/slow"}, ModCache: src.cache, Source: src, FetchTimeout: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	code, _, body := get(t, srv, "/example.com/slow/@v/v1.0.0.zip")
	if code != http.StatusNotFound || !strings.Contains(body, "took longer than 200ms") {
		t.Errorf("slow fetch = %d %q; want 404 naming the timeout", code, body)
	}
}

func TestFileLimitAndSymlink(t *testing.T) {
	srv, src := newTestProxy(t, "example.com/ok")
	if code, _, _ := get(t, srv, "/example.com/ok/@v/v1.0.0.info"); code != 200 {
		t.Fatal("setup download failed")
	}
	dir := filepath.Join(src.cache, "cache", "download", "example.com", "ok", "@v")
	// A symlink out of the cache is not followed.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "v1.1.0.mod")); err != nil {
		t.Fatal(err)
	}
	code, _, body := get(t, srv, "/example.com/ok/@v/v1.1.0.mod")
	if code == 200 && strings.Contains(body, "secret") {
		t.Errorf("served a file outside the module cache through a symlink")
	}

	p, err := New(Config{Allow: []string{"example.com/ok"}, ModCache: src.cache, Source: src, MaxFileBytes: 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	small := httptest.NewServer(p)
	defer small.Close()
	code, _, body = get(t, small, "/example.com/ok/@v/v1.0.0.zip")
	if code != http.StatusNotFound || !strings.Contains(body, "over this proxy's limit of 10") {
		t.Errorf("oversized zip = %d %q; want 404 naming the limit", code, body)
	}
}

func TestValidatePatterns(t *testing.T) {
	for _, ok := range [][]string{nil, {"github.com/foo/*"}, {"golang.org/x/text", "rsc.io/*"}, {"*"}} {
		if err := ValidatePatterns(ok); err != nil {
			t.Errorf("ValidatePatterns(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " a.com", "a.com,b.com", "a.com/[", "/a.com", "a.com/", "a.com//b", "a.com/../b"} {
		if err := ValidatePatterns([]string{bad}); err == nil {
			t.Errorf("ValidatePatterns(%q) = nil", bad)
		}
	}
	if _, err := New(Config{Allow: []string{"a.com/["}, ModCache: "x", Source: &fakeSource{}}); err == nil {
		t.Error("New accepted a bad pattern")
	}
}

func TestSuggestPattern(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/foo/bar/baz":      "github.com/foo/bar",
		"github.com/foo":              "github.com/foo",
		"golang.org/x/text/language":  "golang.org/x/text",
		"k8s.io/client-go/kubernetes": "k8s.io/client-go",
		"rsc.io/quote":                "rsc.io/quote",
		"gopkg.in/yaml.v3":            "gopkg.in/yaml.v3",
		"example.com":                 "example.com",
	} {
		if got := SuggestPattern(in); got != want {
			t.Errorf("SuggestPattern(%q) = %q; want %q", in, got, want)
		}
		if !Allowed([]string{SuggestPattern(in)}, in) {
			t.Errorf("the pattern suggested for %q does not allow it", in)
		}
	}
}

// TestRefusalLogBounded: 995 refused requests (as a sandbox sent in 10 s,
// which wrote 725 KB to mcp-server's stderr) log ratelog.OutsideBurst
// lines; each is still refused with the allowlist's hint, and a fetch
// logged meanwhile has a budget of its own.
func TestRefusalLogBounded(t *testing.T) {
	var buf syncBuffer
	src := &fakeSource{cache: t.TempDir(), versions: map[string][]string{"example.com/ok": {"v1.0.0"}}}
	p, err := New(Config{Allow: []string{"example.com/ok"}, ModCache: src.cache, Source: src, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	for i := range 995 {
		code, _, body := get(t, srv, fmt.Sprintf("/example.com/refused%d/@v/list", i))
		if code != http.StatusNotFound || !strings.Contains(body, "allowlist") {
			t.Fatalf("request %d: %d %q; want 404 naming the allowlist", i, code, body)
		}
	}
	if code, _, _ := get(t, srv, "/example.com/ok/@v/list"); code != http.StatusOK {
		t.Fatalf("allowed list: %d", code)
	}
	out := buf.String()
	refused, fetched := strings.Count(out, "module proxy: refused"), strings.Count(out, "module proxy: fetch")
	if refused != ratelog.OutsideBurst || fetched != 1 || len(out) > 4096 {
		t.Errorf("995 refusals and a fetch logged %d refusal lines, %d fetch lines, %d bytes; want %d, 1, a few KB", refused, fetched, len(out), ratelog.OutsideBurst)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// blockingSource is a fakeSource whose downloads wait until release is
// closed, and report on started when they begin.
type blockingSource struct {
	*fakeSource
	started chan string
	release chan struct{}
}

func (b *blockingSource) Download(ctx context.Context, mod, v string) error {
	b.started <- mod
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.fakeSource.Download(ctx, mod, v)
}

// TestFetchSlotsPerClient: one client (a sandbox) holding a slow fetch
// cannot take the proxy's other slot; its next fetch waits for its own to
// end, and another client's fetch runs meanwhile. Before, one sandbox
// asking for two slow modules held both slots for FetchTimeout.
func TestFetchSlotsPerClient(t *testing.T) {
	src := &blockingSource{
		fakeSource: &fakeSource{cache: t.TempDir(), versions: map[string][]string{"example.com/a": {"v1.0.0"}, "example.com/b": {"v1.0.0"}, "example.com/c": {"v1.0.0"}}},
		started:    make(chan string, 3),
		release:    make(chan struct{}),
	}
	p, err := New(Config{Allow: []string{"example.com"}, ModCache: src.cache, Source: src, FetchTimeout: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(client, mod string) chan int {
		code := make(chan int, 1)
		go func() {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/"+mod+"/@v/v1.0.0.zip", nil)
			p.ServeHTTP(w, r.WithContext(WithClient(r.Context(), client)))
			code <- w.Code
		}()
		return code
	}
	a1 := serve("sandbox-1", "example.com/a")
	if got := <-src.started; got != "example.com/a" {
		t.Fatalf("first fetch: %s", got)
	}
	a2 := serve("sandbox-1", "example.com/b")
	b1 := serve("sandbox-2", "example.com/c")
	// The other sandbox's fetch starts while sandbox-1 holds its slot;
	// sandbox-1's second fetch does not.
	if got := <-src.started; got != "example.com/c" {
		t.Fatalf("second fetch to start: %s; want sandbox-2's (example.com/c), sandbox-1 may hold one slot only", got)
	}
	close(src.release)
	for name, c := range map[string]chan int{"sandbox-1 first": a1, "sandbox-1 second": a2, "sandbox-2": b1} {
		if code := <-c; code != 200 {
			t.Errorf("%s: %d", name, code)
		}
	}
	if len(p.clients.m) != 0 {
		t.Errorf("%d clients kept after their fetches ended", len(p.clients.m))
	}
}
