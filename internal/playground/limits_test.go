package playground

import (
	"net/http"
	"net/http/httptest"
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
	_, ran := f.load(t, "192.0.2.1:2")
	if code, text := f.post(t, c, "/api/run", action("package main\n\nfunc main() {}\n"), "Cookie", cookieName+"="+ran); code != 200 {
		t.Fatalf("an accepted run: %d %q", code, text)
	}
	sessions := map[string]*browser{"refused": f.backdate(t, refused), "ran": f.backdate(t, ran)}
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
