package playground

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestUnusedSessionsForgotten(t *testing.T) {
	bs := newBrowsers(3)
	mint := func(client string) *browser {
		t.Helper()
		w := httptest.NewRecorder()
		if _, err := bs.mint(w, httptest.NewRequest("GET", "/", nil), client); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		for _, c := range w.Result().Cookies() {
			r.AddCookie(c)
		}
		b, ok := bs.lookup(r)
		if !ok {
			t.Fatal("a minted session is not found by its cookie")
		}
		return b
	}
	used, unused, recent := mint("a"), mint("b"), mint("c")
	if _, err := bs.mint(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "d"); err != errTooManyBrowsers {
		t.Fatalf("a fourth session: %v, want errTooManyBrowsers", err)
	}
	used.use()
	for _, b := range []*browser{used, unused} {
		b.lastSeen = time.Now().Add(-2 * unusedTTL)
	}
	if n := bs.sweep(24 * time.Hour); n != 1 {
		t.Errorf("swept %d sessions, want 1 (the unused one idle past %s)", n, unusedTTL)
	}
	select {
	case <-unused.ended:
	default:
		t.Error("the forgotten session's slot was not ended")
	}
	for name, b := range map[string]*browser{"used": used, "recent": recent} {
		select {
		case <-b.ended:
			t.Errorf("the %s session was forgotten", name)
		default:
		}
	}
	if _, err := bs.mint(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "b"); err != nil {
		t.Errorf("a session in the freed place (its client's too): %v", err)
	}
}
