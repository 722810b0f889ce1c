package playground

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcphttp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// fixture is a playground on the fake backend, served by httptest.
type fixture struct {
	srv     *Server
	ts      *httptest.Server
	backend *goruntimetest.Backend
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	b := goruntimetest.New(t.TempDir())
	cfg := Defaults()
	cfg.Backend = b
	cfg.ShareDir = t.TempDir()
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		cancel()
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &fixture{srv: srv, ts: ts, backend: b}
}

// browser is a client with a cookie jar that has loaded the page.
func (f *fixture) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	res, err := c.Get(f.ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /: %s", res.Status)
	}
	return c
}

// post sends body to path as the page does (same origin), with extra
// headers; it returns the status and the whole answer.
func (f *fixture) post(t *testing.T, c *http.Client, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", f.ts.URL)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// action is an action request's body.
func action(files string) string {
	data, _ := json.Marshal(actionRequest{Files: files})
	return string(data)
}

// events parses an action's NDJSON answer.
func events(t *testing.T, body string) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func TestCrossOriginRefused(t *testing.T) {
	f := newFixture(t, nil)
	c := f.browser(t)
	body := action("package main\n\nfunc main() {}\n")
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"other origin", []string{"Origin", "http://evil.example"}},
		{"same host, other port", []string{"Origin", "http://127.0.0.1:1"}},
		{"cross-site fetch, no origin", []string{"Origin", "", "Sec-Fetch-Site", "cross-site"}},
	} {
		for _, path := range []string{"/api/run", "/api/share", "/api/versions"} {
			code, text := f.post(t, c, path, body, tc.hdr...)
			if code != http.StatusForbidden {
				t.Errorf("%s: POST %s: %d %q, want 403", tc.name, path, code, text)
			}
		}
	}
	if n := f.backend.Opened(); n != 0 {
		t.Errorf("refused requests opened %d sandboxes", n)
	}
	// The page's own origin passes.
	if code, text := f.post(t, c, "/api/versions", "{}"); code != 200 {
		t.Fatalf("same origin: %d %q", code, text)
	}
}

func TestOversizeAndMalformedRefused(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.MaxRequestBytes = 4 << 10
		c.MaxShareBytes = 1 << 10
		c.MaxFiles = 3
	})
	c := f.browser(t)
	big := action("package main\n// " + strings.Repeat("x", 5<<10) + "\nfunc main() {}\n")
	manyFiles := action("-- a.go --\n-- b.go --\n-- c.go --\n-- d.go --\n")
	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"body past the cap", "/api/run", big, 413, "request too large: at most 4096 bytes"},
		{"too many files", "/api/run", manyFiles, 413, "4 files, at most 3"},
		{"share past the cap", "/api/share", strings.Repeat("x", 2<<10), 413, "too large to share: at most 1024 bytes"},
		{"not JSON", "/api/run", "package main", 400, "malformed request"},
		{"unknown field", "/api/run", `{"files":"package main","command":"rm -rf /"}`, 400, `unknown field "command"`},
		{"two JSON values", "/api/run", `{"files":"x"}{"files":"y"}`, 400, "more than one JSON value"},
		{"a file given twice", "/api/test", action("-- a.go --\n-- a.go --\n"), 400, "file a.go given twice"},
		{"a path outside /app", "/api/run", action("-- ../x.go --\npackage x\n"), 400, "use paths relative to /app"},
		{"an empty module", "/api/format", action(""), 400, "no files"},
		{"a bad Go version", "/api/run", `{"files":"package main","version":"latest"}`, 400, `go version "latest"`},
		{"stdin's own name", "/api/run", action("-- .playground-stdin --\n"), 400, "rename the file"},
	} {
		code, text := f.post(t, c, tc.path, tc.body)
		if code != tc.code || !strings.Contains(text, tc.want) {
			t.Errorf("%s: %d %q, want %d and %q", tc.name, code, text, tc.code, tc.want)
		}
	}
	if n := f.backend.Opened(); n != 0 {
		t.Errorf("refused requests opened %d sandboxes", n)
	}
}

func TestNoSessionRefused(t *testing.T) {
	f := newFixture(t, nil)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	code, text := f.post(t, c, "/api/run", action("package main\n"))
	if code != http.StatusForbidden || !strings.Contains(text, "reload the page") {
		t.Errorf("no cookie: %d %q", code, text)
	}
	code, text = f.post(t, c, "/api/run", action("package main\n"), "Cookie", cookieName+"=guessed")
	if code != http.StatusForbidden {
		t.Errorf("guessed cookie: %d %q", code, text)
	}
}

func TestIdleTTLClosesSandbox(t *testing.T) {
	const ttl = time.Second
	f := newFixture(t, func(c *Config) { c.IdleTTL = ttl }) // SessionTTL stays 24 h
	c := f.browser(t)
	if code, text := f.post(t, c, "/api/versions", "{}"); code != 200 {
		t.Fatalf("versions: %d %q", code, text)
	}
	if f.srv.OpenSandboxes() != 1 || f.backend.Live() != 1 {
		t.Fatalf("after a call: %d open, %d live, want 1", f.srv.OpenSandboxes(), f.backend.Live())
	}
	deadline := time.Now().Add(60 * time.Second)
	for f.backend.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still open a minute after the idle TTL (%s)", ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := f.srv.OpenSandboxes(); n != 0 {
		t.Errorf("pool still counts %d sandboxes", n)
	}
	if f.backend.Closed() != 1 {
		t.Errorf("closed %d sandboxes, want 1", f.backend.Closed())
	}
	// The session goes on in a fresh sandbox, and is told so.
	code, text := f.post(t, c, "/api/format", action("package main\n"))
	if code != 200 || !strings.Contains(text, "sandbox was closed after") {
		t.Errorf("the call after the idle TTL: %d %q, want a note that the sandbox was closed", code, text)
	}
	if f.backend.Opened() != 2 {
		t.Errorf("opened %d sandboxes, want 2", f.backend.Opened())
	}
}

func TestSessionTTLForgetsBrowser(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.IdleTTL, c.SessionTTL = time.Second, time.Second })
	c := f.browser(t)
	if code, text := f.post(t, c, "/api/versions", "{}"); code != 200 {
		t.Fatalf("versions: %d %q", code, text)
	}
	deadline := time.Now().Add(60 * time.Second)
	for f.srv.browsers.count() != 0 || f.backend.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the session TTL: %d sessions remembered, %d sandboxes live", f.srv.browsers.count(), f.backend.Live())
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, text := f.post(t, c, "/api/versions", "{}")
	if code != http.StatusForbidden || !strings.Contains(text, "reload the page") {
		t.Errorf("a forgotten session's call: %d %q, want 403", code, text)
	}
}

// listProgram prints the names in its working directory.
const listProgram = `package main

import (
	"fmt"
	"os"
)

func main() {
	es, err := os.ReadDir(".")
	if err != nil {
		panic(err)
	}
	for _, e := range es {
		fmt.Println("file:", e.Name())
	}
}
`

func TestBrowserSessionsIsolated(t *testing.T) {
	f := newFixture(t, nil)
	a, b := f.browser(t), f.browser(t)
	secret := "-- main.go --\n" + listProgram + "-- secret_of_a.txt --\nA's secret\n"
	code, text := f.post(t, a, "/api/run", action(secret))
	if code != 200 || !strings.Contains(text, "file: secret_of_a.txt") {
		t.Fatalf("A's run: %d %q", code, text)
	}
	code, text = f.post(t, b, "/api/run", action("-- main.go --\n"+listProgram))
	if code != 200 {
		t.Fatalf("B's run: %d %q", code, text)
	}
	evs := events(t, text)
	if last := evs[len(evs)-1]; last.Kind != "done" || last.Outcome != "ok" {
		t.Fatalf("B's run ended with %+v", last)
	}
	if strings.Contains(text, "secret_of_a") {
		t.Errorf("B sees A's file: %q", text)
	}
	if !strings.Contains(text, "file: main.go") {
		t.Errorf("B's listing lacks its own main.go: %q", text)
	}
	if n := f.backend.Opened(); n != 2 {
		t.Errorf("two browser sessions opened %d sandboxes, want 2", n)
	}
}

func TestRemovedFileLeavesSandbox(t *testing.T) {
	f := newFixture(t, nil)
	c := f.browser(t)
	code, text := f.post(t, c, "/api/run", action("-- main.go --\n"+listProgram+"-- old.txt --\nx\n"))
	if code != 200 || !strings.Contains(text, "file: old.txt") {
		t.Fatalf("first run: %d %q", code, text)
	}
	code, text = f.post(t, c, "/api/run", action("-- main.go --\n"+listProgram))
	if code != 200 || strings.Contains(text, "old.txt") || !strings.Contains(text, "file: main.go") {
		t.Errorf("a file removed in the editor is still in the sandbox: %d %q", code, text)
	}
	if n := f.backend.Opened(); n != 1 {
		t.Errorf("opened %d sandboxes, want 1 (the session keeps its sandbox)", n)
	}
}

func TestRunsKeepTheSandbox(t *testing.T) {
	f := newFixture(t, nil)
	c := f.browser(t)
	// A program that lists what is in /app, then leaves a file there.
	prog := "-- main.go --\n" + strings.Replace(listProgram, "\tfor _, e := range es {", "\tdefer os.WriteFile(\"left_by_run.txt\", nil, 0o644)\n\tfor _, e := range es {", 1)
	if !strings.Contains(prog, "defer os.WriteFile") {
		t.Fatal("the program lost its write")
	}
	for i := range 2 {
		code, text := f.post(t, c, "/api/run", action(prog))
		if code != 200 || !strings.Contains(text, `"outcome":"ok"`) {
			t.Fatalf("run %d: %d %q", i+1, code, text)
		}
		if i == 1 && !strings.Contains(text, "file: left_by_run.txt") {
			t.Errorf("the second run of the same files found /app emptied: %q", text)
		}
	}
}

func TestShareContentAddressed(t *testing.T) {
	f := newFixture(t, nil)
	c := f.browser(t)
	text := "-- go.mod --\nmodule m\n-- main.go --\npackage main\n"
	var ids []string
	for range 2 {
		code, body := f.post(t, c, "/api/share", text)
		if code != 200 {
			t.Fatalf("share: %d %q", code, body)
		}
		var got struct{ ID, URL string }
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the same text got two links: %v", ids)
	}
	if code, body := f.post(t, c, "/api/share", text+"\n"); code != 200 || strings.Contains(body, ids[0]) {
		t.Errorf("another text got the same link: %d %q", code, body)
	}
	res, err := c.Get(f.ts.URL + "/api/share/" + ids[0])
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(got) != text {
		t.Errorf("shared text back: %q, want %q", got, text)
	}
	// The link's page starts a fresh browser session.
	res, err = c.Get(f.ts.URL + "/p/" + ids[0])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || len(res.Cookies()) != 1 || res.Cookies()[0].Name != cookieName {
		t.Errorf("GET /p/<id>: %s, cookies %v: want 200 and a fresh session", res.Status, res.Cookies())
	}
	for _, id := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "../../etc/passwd", "x"} {
		res, err := c.Get(f.ts.URL + "/p/" + id)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 404 {
			t.Errorf("GET /p/%s: %s, want 404", id, res.Status)
		}
	}
}

func TestPageHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/", "/static/app.js", "/api/share/x"} {
		res, err := http.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Content-Security-Policy"); got != contentSecurityPolicy {
			t.Errorf("%s: CSP %q", path, got)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", path, got)
		}
	}
	for _, dir := range []string{"/static/", "/static/examples/"} {
		res, err := http.Get(f.ts.URL + dir)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404 (no listings)", dir, res.Status)
		}
	}
	res, err := http.Get(f.ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ck := res.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || len(ck[0].Value) < 43 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, 32 random bytes", ck)
	}
}

func TestAuth(t *testing.T) {
	const token = "0123456789abcdef-secret"
	f := newFixture(t, func(c *Config) {
		c.HTTP.Principals = []mcphttp.Principal{{Name: "alice", Token: token}}
		c.MaxPerPrincipal = 1
	})
	// The page itself needs no token: it asks for one on the first 401.
	c := f.browser(t)
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong-token-wrong-token"}} {
		code, text := f.post(t, c, "/api/versions", "{}", hdr...)
		if code != http.StatusUnauthorized {
			t.Errorf("%v: %d %q, want 401", hdr, code, text)
		}
	}
	if n := f.backend.Opened(); n != 0 {
		t.Errorf("refused requests opened %d sandboxes", n)
	}
	if code, text := f.post(t, c, "/api/versions", "{}", "Authorization", "Bearer "+token); code != 200 {
		t.Fatalf("with the token: %d %q", code, text)
	}
	// alice holds her one sandbox: a second browser session of hers is
	// refused with the session layer's wording.
	c2 := f.browser(t)
	code, text := f.post(t, c2, "/api/versions", "{}", "Authorization", "Bearer "+token)
	if code != http.StatusTooManyRequests || !strings.Contains(text, `"alice" already holds 1 of the 1 sandboxes`) {
		t.Errorf("alice's second session: %d %q, want 429 naming her share", code, text)
	}
}
