package contract

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
)

// TestUnpackUnsupported: the answer a server without /unpack gives
// (its router's 404, no error code) is errors.ErrUnsupported, so a Session
// falls back to tar; a 404 with an error code is not. The first case
// asks a real runtime server for a route it does not have, as an older
// server answers /unpack.
func TestUnpackUnsupported(t *testing.T) {
	srv, err := server.New(server.Config{BaseDir: t.TempDir(), ExecTimeout: time.Minute, MaxOutputBytes: 1 << 20, MaxUploadBytes: 1 << 20, FallbackHome: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name        string
		handler     http.Handler
		unsupported bool
	}{
		{"no such route", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.URL.Path, r.URL.RawPath = "/unpack-not-here", ""
			srv.ServeHTTP(w, r)
		}), true},
		{"route answers 404", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"gone","error_code":"not_found"}`))
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.handler)
			defer ts.Close()
			c := New(func(ctx context.Context) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(ts.URL, "http://"))
			}, 1<<20)
			defer c.Close()
			err := c.Unpack(context.Background(), strings.NewReader(""), nil)
			if got := errors.Is(err, errors.ErrUnsupported); got != tc.unsupported || err == nil {
				t.Errorf("unpack = %v; ErrUnsupported %v, want %v", err, got, tc.unsupported)
			}
		})
	}
}
