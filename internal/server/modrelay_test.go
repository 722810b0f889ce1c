package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// relayAddr returns the address the binary's module relay logged.
func relayAddr(t *testing.T, p *proc) string {
	t.Helper()
	for _, line := range strings.Split(p.logs(), "\n") {
		var m struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "module relay listening" {
			return m.Addr
		}
	}
	t.Fatalf("no module relay in the logs:\n%s", p.logs())
	return ""
}

// TestBinaryModuleRelay: the relay forwards GET requests, path and query
// unchanged, to the host proxy's unix socket, refuses other methods, and
// answers 404 with a reason when the host proxy is gone (the go command's
// "not found", so GOPROXY's file:// fallback and import path search go on).
func TestBinaryModuleRelay(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "modproxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	host := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "host saw "+r.Method+" "+r.URL.RequestURI())
	})}
	go host.Serve(ln)
	defer host.Close()

	// TMPDIR: the commands' fallback HOME goes there, not in a shared /tmp
	// where another user's run may have left one.
	p := startBinary(t, []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir()},
		"--module-relay-addr", "127.0.0.1:0", "--module-relay-socket", sock)
	base := "http://" + relayAddr(t, p)

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/github.com/!burnt!sushi/toml/@v/list"); code != 200 || body != "host saw GET /github.com/!burnt!sushi/toml/@v/list" {
		t.Errorf("relayed GET = %d %q", code, body)
	}
	resp, err := http.Post(base+"/x/@v/list", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST through the relay = %d; want 405", resp.StatusCode)
	}

	host.Close()
	if code, body := get("/golang.org/x/text/@v/list"); code != http.StatusNotFound || !strings.Contains(body, "host's module proxy is not reachable") {
		t.Errorf("GET with the host proxy gone = %d %q; want 404 saying why", code, body)
	}
}

// TestBinaryModuleRelayFlags: the relay listens only on loopback and
// needs both of its flags.
func TestBinaryModuleRelayFlags(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--module-relay-addr", "0.0.0.0:7079", "--module-relay-socket", "/nonexistent.sock"},
		{"--module-relay-addr", "127.0.0.1:7079"},
		{"--module-relay-socket", "/nonexistent.sock"},
		{"--module-relay-addr", "localhost:7079", "--module-relay-socket", "/nonexistent.sock"},
	} {
		cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--base-dir", t.TempDir()}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "module-relay") {
			t.Errorf("%q: err %v, output %s; want exit 2 naming the flag", args, err, out)
		}
	}
}
