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
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// TestExecMapsTheAnswer: a real runtime server's /execute answer becomes
// the ExecResult Result makes: output, exit code, the server's duration,
// truncation with LimitOutput, a timeout with 124.
func TestExecMapsTheAnswer(t *testing.T) {
	srv, err := server.New(server.Config{BaseDir: t.TempDir(), ExecTimeout: time.Minute, MaxOutputBytes: 2048, MaxUploadBytes: 1 << 20, FallbackHome: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := New(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(ts.URL, "http://"))
	}, 2048)
	defer c.Close()
	ctx := context.Background()

	res, err := c.Exec(ctx, goruntime.ExecRequest{Command: `echo "$X"; echo err >&2; exit 3`, Env: map[string]string{"X": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "hi\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.TimedOut || res.Limit != "" || res.Duration <= 0 {
		t.Errorf("plain command: %+v", res)
	}
	res, err = c.Exec(ctx, goruntime.ExecRequest{Command: "head -c 5000 /dev/zero | tr '\\0' a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) >= 5000 || !res.StdoutTruncated || res.Limit != goruntime.LimitOutput {
		t.Errorf("long output: %d bytes, truncated %v, limit %q", len(res.Stdout), res.StdoutTruncated, res.Limit)
	}
	res, err = c.Exec(ctx, goruntime.ExecRequest{Command: "sleep 30", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != wire.ExitTimedOut {
		t.Errorf("timed out command: %+v", res)
	}
}

func TestRequestTimeout(t *testing.T) {
	for d, want := range map[time.Duration]float64{0: 0, -time.Second: 0, time.Microsecond: 0.001, 1500 * time.Millisecond: 1.5} {
		if got := Request(goruntime.ExecRequest{Command: "x", Timeout: d}).TimeoutSeconds; got != want {
			t.Errorf("timeout %s: timeout_seconds %v, want %v", d, got, want)
		}
	}
}

// TestUnpackExecAgainstServer: against a real runtime server the files
// land and the command sees them; files it will not write are a
// *goruntime.FilesError with Unpack's sentinel and the command does not
// run; a command request it refuses is not a files error; a server
// without the route (asked for one it lacks, as an older server is) is
// errors.ErrUnsupported.
func TestUnpackExecAgainstServer(t *testing.T) {
	srv, _ := realServer(t)
	c := clientOf(t, srv)
	ctx := context.Background()
	res, err := c.UnpackExec(ctx, tarOf(t, "main.go", "package main\n"), goruntime.ExecRequest{Command: "cat main.go"})
	if err != nil || res.Stdout != "package main\n" || res.ExitCode != 0 {
		t.Fatalf("UnpackExec = %+v, %v", res, err)
	}
	var filesErr *goruntime.FilesError
	_, err = c.UnpackExec(ctx, tarOf(t, "../evil.go", "x"), goruntime.ExecRequest{Command: "echo ran > ran"})
	if !errors.As(err, &filesErr) || !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("files outside /app: %v; want a FilesError wrapping ErrPathEscape", err)
	}
	if res, err := c.Exec(ctx, goruntime.ExecRequest{Command: "test ! -e ran"}); err != nil || res.ExitCode != 0 {
		t.Errorf("the command ran after its files were refused (%+v, %v)", res, err)
	}
	_, err = c.UnpackExec(ctx, tarOf(t, "ok.go", "x"), goruntime.ExecRequest{Command: "true", Env: map[string]string{"A=B": "c"}})
	if err == nil || errors.As(err, &filesErr) {
		t.Errorf("a refused env: %v; want an error that is not a FilesError", err)
	}
	old := clientOf(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path, r.URL.RawPath = "/unpack-execute-not-here", ""
		srv.ServeHTTP(w, r)
	}))
	if _, err := old.UnpackExec(ctx, tarOf(t, "ok.go", "x"), goruntime.ExecRequest{Command: "true"}); !errors.Is(err, errors.ErrUnsupported) || errors.As(err, &filesErr) {
		t.Errorf("a server without the route: %v; want errors.ErrUnsupported", err)
	}
}
