package server

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server given an idle exit stops once nothing has been in flight for
// that long, but never while a command runs past it.
func TestServeEndsItselfWhenIdle(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	logs := &lockedWriter{}
	cfg := Config{
		BaseDir: t.TempDir(), ExecTimeout: time.Minute, MaxOutputBytes: 8 << 20, MaxUploadBytes: 1 << 20,
		Environ: os.Environ(), FallbackHome: t.TempDir(), Log: slog.New(slog.NewJSONHandler(logs, nil)),
		IdleExit: time.Second,
	}
	served := make(chan int, 1)
	go func() {
		served <- Serve(context.Background(), cfg, Listeners{Addr: "unix:" + sock, ShutdownTimeout: time.Second})
	}()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A command of 2.5 s, past the 1 s idle exit: the server must stay.
	start := time.Now()
	resp, err := hc.Post("http://sandbox/execute", "application/json", bytes.NewReader([]byte(`{"command":"sleep 2.5; echo done"}`)))
	if err != nil {
		t.Fatalf("execute during the idle exit's span: %v", err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), "done") {
		t.Fatalf("execute: %s", body.String())
	}
	select {
	case code := <-served:
		t.Fatalf("server stopped (%d) while a command ran", code)
	default:
	}
	select {
	case code := <-served:
		if code != 0 {
			t.Errorf("Serve returned %d after the idle exit, want 0", code)
		}
		if waited := time.Since(start); waited < 3500*time.Millisecond {
			t.Errorf("stopped %s after the request began, want at least the command's 2.5 s plus the 1 s idle", waited)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server still serving 20 s after its last request with a 1 s idle exit")
	}
	if !strings.Contains(logs.String(), "idle past --idle-exit") {
		t.Errorf("log does not say why it stopped:\n%s", logs.String())
	}
}

func TestIdleExitFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  string
	}{
		{nil, 0, ""},
		{[]string{"--idle-exit", "90"}, 90 * time.Second, ""},
		{[]string{"--idle-exit", "-1"}, 0, "idle-exit=-1 (from --idle-exit)"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := Defaults()
		f.BaseDir = t.TempDir()
		RegisterFlags(fs, &f, func(string) (string, bool) { return "", false })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := f.Validate(fs, func(string) string { return "" }, slog.New(slog.DiscardHandler))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.IdleExit != tc.want {
			t.Errorf("%v: IdleExit %s, err %v; want %s", tc.args, cfg.IdleExit, err, tc.want)
		}
	}
}
