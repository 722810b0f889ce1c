package modproxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDownloadBudget: once the proxy's downloads have added
// MaxDownloadBytes to the module cache, a version not in the cache is
// refused with a message naming the setting, and nothing is fetched for
// it; versions already cached are still served.
func TestDownloadBudget(t *testing.T) {
	_, src := newTestProxy(t)
	p, err := New(Config{Allow: []string{"example.com/*"}, ModCache: src.cache, Source: src, FetchTimeout: 5 * time.Second,
		MaxDownloadBytes: 1, BudgetSetting: "--module-download-mb", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	if code, _, body := get(t, srv, "/example.com/ok/@v/v1.0.0.zip"); code != http.StatusOK {
		t.Fatalf("first download, within the budget: %d %s", code, body)
	}
	code, _, body := get(t, srv, "/example.com/other/@v/v0.1.0.mod")
	if code != http.StatusNotFound || !strings.Contains(body, "download budget is spent") || !strings.Contains(body, "--module-download-mb") {
		t.Errorf("a new version past the budget: %d %q; want 404 naming the budget and its setting", code, body)
	}
	for _, c := range src.Calls() {
		if strings.Contains(c, "example.com/other") {
			t.Errorf("the source was asked for a version past the budget: %v", src.Calls())
		}
	}
	if code, _, body := get(t, srv, "/example.com/ok/@v/v1.0.0.mod"); code != http.StatusOK {
		t.Errorf("a cached version past the budget: %d %s; want it served", code, body)
	}
}
