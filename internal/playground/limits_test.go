package playground

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// load loads the page as a client at addr; it returns the answer and the
// session cookie's value ("" for none).
func (f *fixture) load(t *testing.T, addr string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			return w, c.Value
		}
	}
	return w, ""
}

// backdate makes the session of cookie seen last long enough ago for an
// unused one to be forgotten.
func (f *fixture) backdate(t *testing.T, cookie string) *browser {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	b, ok := f.srv.browsers.lookup(r)
	if !ok {
		t.Fatal("the session is not remembered")
	}
	b.mu.Lock()
	b.lastSeen = time.Now().Add(-2 * unusedTTL)
	b.mu.Unlock()
	return b
}

func TestBrowserSessionsPerClient(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxBrowserSessions = 8 }) // 2 a client
	for i := range 2 {
		if w, ck := f.load(t, "192.0.2.1:1000"); w.Code != 200 || ck == "" {
			t.Fatalf("session %d of a client: %d %q", i+1, w.Code, w.Body)
		}
	}
	w, ck := f.load(t, "192.0.2.1:1001")
	if w.Code != http.StatusTooManyRequests || ck != "" || !strings.Contains(w.Body.String(), "too many browser sessions from this client: it holds 2, at most 2 of the server's 8") {
		t.Errorf("a client's third session: %d, cookie %q; want 429 naming its share: %.200q", w.Code, ck, w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra != strconv.Itoa(int(unusedTTL/time.Second)) {
		t.Errorf("Retry-After %q, want the unused sessions' TTL", ra)
	}
	// Other clients still get theirs, up to the server's bound.
	for _, addr := range []string{"192.0.2.2:1", "192.0.2.2:2", "192.0.2.3:1", "192.0.2.3:2", "192.0.2.4:1", "192.0.2.4:2"} {
		if w, ck := f.load(t, addr); w.Code != 200 || ck == "" {
			t.Fatalf("%s: %d %q", addr, w.Code, w.Body)
		}
	}
	w, _ = f.load(t, "192.0.2.5:1")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "too many browser sessions on this server") {
		t.Errorf("past the server's bound: %d %q, want 503", w.Code, w.Body)
	}
	// A forgotten session frees its client's place.
	f.srv.browsers.sweep(time.Nanosecond)
	if w, _ := f.load(t, "192.0.2.1:1002"); w.Code != 200 {
		t.Errorf("after the sweep: %d %q", w.Code, w.Body)
	}
}

// A refused API call must not mark its session used: minted cookies sent
// one bad request each would otherwise hold their places for SessionTTL.
func TestRefusedCallLeavesSessionUnused(t *testing.T) {
	f := newFixture(t, nil)
	c := &http.Client{}
	_, refused := f.load(t, "192.0.2.1:1")
	for _, body := range []string{"x", action("-- ../x.go --\n"), `{"files":"package main","version":"latest"}`} {
		if code, text := f.post(t, c, "/api/run", body, "Cookie", cookieName+"="+refused); code != http.StatusBadRequest {
			t.Fatalf("%q: %d %q, want 400", body, code, text)
		}
	}
	if code, text := f.post(t, c, "/api/share", "-- a --\n-- a --\n", "Cookie", cookieName+"="+refused); code != http.StatusBadRequest {
		t.Fatalf("a malformed share: %d %q, want 400", code, text)
	}
	_, ran := f.load(t, "192.0.2.1:2")
	if code, text := f.post(t, c, "/api/run", action("package main\n\nfunc main() {}\n"), "Cookie", cookieName+"="+ran); code != 200 {
		t.Fatalf("an accepted run: %d %q", code, text)
	}
	_, shared := f.load(t, "192.0.2.1:3")
	if code, text := f.post(t, c, "/api/share", "package main\n", "Cookie", cookieName+"="+shared); code != 200 {
		t.Fatalf("an accepted share: %d %q", code, text)
	}
	sessions := map[string]*browser{"refused": f.backdate(t, refused), "ran": f.backdate(t, ran), "shared": f.backdate(t, shared)}
	f.srv.browsers.sweep(24 * time.Hour)
	for name, b := range sessions {
		select {
		case <-b.ended:
			if name != "refused" {
				t.Errorf("the session whose call was accepted (%s) was forgotten", name)
			}
		default:
			if name == "refused" {
				t.Error("the session whose calls were all refused was kept")
			}
		}
	}
}

// sharedTexts is how many texts dir holds.
func sharedTexts(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if idRE.MatchString(e.Name()) {
			n++
		}
	}
	return n
}

func TestShareNeedsSession(t *testing.T) {
	f := newFixture(t, nil)
	for _, hdr := range [][]string{nil, {"Cookie", cookieName + "=guessed"}} {
		code, text := f.post(t, &http.Client{}, "/api/share", "package main\n", hdr...)
		if code != http.StatusForbidden || !strings.Contains(text, "reload the page") {
			t.Errorf("share with %v: %d %q, want 403", hdr, code, text)
		}
	}
	if n := sharedTexts(t, f.srv.cfg.ShareDir); n != 0 {
		t.Errorf("the share directory holds %d texts, want none", n)
	}
}

func TestShareStoreQuota(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *Config) {
		c.ShareDir = dir
		c.MaxShareStoreBytes = 1000
	}
	f := newFixture(t, cfg)
	c := f.browser(t)
	a := "package a\n//" + strings.Repeat("a", 587) + "\n" // 600 bytes
	b := "package b\n//" + strings.Repeat("b", 587) + "\n"
	if code, text := f.post(t, c, "/api/share", a); code != 200 {
		t.Fatalf("the first text: %d %q", code, text)
	}
	code, text := f.post(t, c, "/api/share", b)
	if code != http.StatusInsufficientStorage || !strings.Contains(text, "the share store is full: it holds 600 of its 1000 bytes (--max-share-store-mb)") {
		t.Errorf("a text past the quota: %d %q, want 507 naming the flag", code, text)
	}
	if code, text := f.post(t, c, "/api/share", a); code != 200 {
		t.Errorf("a text shared before, the store full: %d %q, want its link", code, text)
	}
	// A restarted server counts what the directory holds.
	g := newFixture(t, cfg)
	if code, text := g.post(t, g.browser(t), "/api/share", b); code != http.StatusInsufficientStorage {
		t.Errorf("past the quota after a restart: %d %q, want 507", code, text)
	}
	if n := sharedTexts(t, dir); n != 1 {
		t.Errorf("the share directory holds %d texts, want 1", n)
	}
}

func TestShareRate(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.SharesPerMinute = 2 })
	c := f.browser(t)
	for i := range 2 {
		if code, text := f.post(t, c, "/api/share", "package main\n//"+strconv.Itoa(i)+"\n"); code != 200 {
			t.Fatalf("share %d: %d %q", i+1, code, text)
		}
	}
	req, err := http.NewRequest("POST", f.ts.URL+"/api/share", strings.NewReader("package main\n"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", f.ts.URL)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	if res.StatusCode != http.StatusTooManyRequests || ra < 1 || ra > 30 {
		t.Errorf("the third share in a minute: %s, Retry-After %q; want 429 and at most 30 s", res.Status, res.Header.Get("Retry-After"))
	}
	if n := sharedTexts(t, f.srv.cfg.ShareDir); n != 2 {
		t.Errorf("the share directory holds %d texts, want 2", n)
	}
}

func TestRateLimiter(t *testing.T) {
	l := newRateLimiter(2)
	t0 := time.Unix(1e9, 0)
	for i := range 2 {
		if ok, _ := l.take("a", t0); !ok {
			t.Fatalf("take %d refused", i+1)
		}
	}
	ok, wait := l.take("a", t0)
	if ok || wait != 30*time.Second {
		t.Errorf("a third take: %v, wait %s; want refused, 30s", ok, wait)
	}
	if ok, _ := l.take("b", t0); !ok {
		t.Error("another client's take refused")
	}
	if ok, _ := l.take("a", t0.Add(30*time.Second)); !ok {
		t.Error("a take after a token's refill refused")
	}
	if ok, _ := l.take("a", t0.Add(31*time.Second)); ok {
		t.Error("a take past the refill allowed")
	}
	// Full buckets are pruned; a client's empty one is not.
	l.pruneAt = 2
	l.take("c", t0.Add(31*time.Second))
	if _, kept := l.buckets["b"]; kept {
		t.Error("a full bucket was kept past the prune")
	}
	if ok, _ := l.take("a", t0.Add(31*time.Second)); ok {
		t.Error("an empty bucket was pruned")
	}
}
