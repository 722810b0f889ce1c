package contract

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func clientOf(t *testing.T, h http.Handler) *Client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	c := New(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(ts.URL, "http://"))
	}, 1<<20)
	t.Cleanup(c.Close)
	return c
}

func realServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	home := t.TempDir()
	srv, err := server.New(server.Config{BaseDir: t.TempDir(), ExecTimeout: time.Minute, MaxOutputBytes: 1 << 20, MaxUploadBytes: 1 << 20,
		Environ: []string{"HOME=" + home}, FallbackHome: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, home
}

// A snapshot taken from one real server and put into another gives it
// the files; a status the trailers do not report "ok" is an error, busy
// is ErrSandboxBusy, and a stream cut short (no trailer) is not whole.
func TestSnapshotTakeAndPut(t *testing.T) {
	one, _ := realServer(t)
	two, _ := realServer(t)
	c1, c2 := clientOf(t, one), clientOf(t, two)
	ctx := context.Background()
	if err := c1.Unpack(ctx, bytes.NewReader(tarOf(t, "main.go", "package main\n")), nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c1.TakeSnapshot(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if err := c2.PutSnapshot(ctx, bytes.NewReader(buf.Bytes()), wire.SnapshotModeAdd); err != nil {
		t.Fatal(err)
	}
	data, err := c2.Download(ctx, "main.go", nil)
	if err != nil || string(data) != "package main\n" {
		t.Fatalf("main.go in the second server: %q, %v", data, err)
	}
	if err := c2.PutSnapshot(ctx, strings.NewReader("not a tar"), "sideways"); err == nil {
		t.Error("a bad mode was accepted")
	}

	for _, tc := range []struct {
		name     string
		trailer  map[string]string
		sentinel error
		want     string
	}{
		{"busy", map[string]string{wire.SnapshotStatusTrailer: "busy", wire.SnapshotErrorTrailer: "a command ran"}, goruntime.ErrSandboxBusy, "a command ran"},
		{"failed", map[string]string{wire.SnapshotStatusTrailer: "internal", wire.SnapshotErrorTrailer: "read x: EIO"}, nil, "read x: EIO"},
		{"cut short", nil, nil, "without its status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clientOf(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Trailer", wire.SnapshotStatusTrailer+", "+wire.SnapshotErrorTrailer)
				_, _ = w.Write([]byte("part of a tar"))
				for k, v := range tc.trailer {
					w.Header().Set(k, v)
				}
			}))
			err := c.TakeSnapshot(ctx, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) {
				t.Errorf("= %v, want %q (%v)", err, tc.want, tc.sentinel)
			}
		})
	}
	old := clientOf(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }))
	if err := old.TakeSnapshot(ctx, &bytes.Buffer{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a server without /snapshot: %v", err)
	}
}

func tarOf(t *testing.T, name, data string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
