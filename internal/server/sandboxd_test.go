package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
)

// TestBinarySandboxdFromEnv: SANDBOXD_GRPC_ADDR and SANDBOXD_REST_ADDR turn
// the sandboxd API on, and its commands get the same environment fixes as
// /execute commands (here the fallback HOME).
func TestBinarySandboxdFromEnv(t *testing.T) {
	dir := t.TempDir()
	grpcSock, restSock := filepath.Join(dir, "g.sock"), filepath.Join(dir, "r.sock")
	p := startBinary(t, []string{
		"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir,
		"SANDBOXD_GRPC_ADDR=unix:" + grpcSock, "SANDBOXD_REST_ADDR=unix:" + restSock,
	})
	conn, err := processclient.Dial("unix:" + grpcSock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := processv1.NewProcessServiceClient(conn).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"/bin/sh", "-c", "pwd; echo $HOME"},
	}})
	if err != nil {
		t.Fatalf("Execute: %v\n%s", err, p.logs())
	}
	want := p.base + "\n" + filepath.Join(dir, "sandbox-home") + "\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("got %q exit %d, want %q", res.Stdout, res.ExitCode, want)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", restSock)
	}}}
	resp, err := hc.Get("http://sandboxd/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("health = %d %s", resp.StatusCode, body)
	}
}

// TestBinarySandboxdFlagsOverrideEnvAndDefaultOff: a flag wins over its
// variable; with neither, the API is off.
func TestBinarySandboxdFlagsOverrideEnvAndDefaultOff(t *testing.T) {
	dir := t.TempDir()
	envSock, flagSock := filepath.Join(dir, "env.sock"), filepath.Join(dir, "flag.sock")
	startBinary(t, append(os.Environ(), "SANDBOXD_GRPC_ADDR=unix:"+envSock), "--grpc-addr", "unix:"+flagSock)
	if _, err := os.Stat(flagSock); err != nil {
		t.Fatalf("flag socket: %v", err)
	}
	if _, err := os.Stat(envSock); !os.IsNotExist(err) {
		t.Fatalf("env socket exists though the flag overrode it: %v", err)
	}

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SANDBOXD_") {
			env = append(env, kv)
		}
	}
	p := startBinary(t, env)
	if strings.Contains(p.logs(), "sandboxd listening") {
		t.Fatalf("sandboxd API started with no address set:\n%s", p.logs())
	}
}

// TestBinarySandboxdBadAddressFails: an address that cannot be served
// stops the server with exit code 1 and says why.
func TestBinarySandboxdBadAddressFails(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "--addr", "unix:"+filepath.Join(dir, "s.sock"), "--base-dir", filepath.Join(dir, "app"), "--grpc-addr", "no-port-here")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v (%v), want 1\n%s", cmd.ProcessState, err, out)
	}
	if !strings.Contains(string(out), "want host:port or unix:/path") {
		t.Fatalf("output does not say what is wrong:\n%s", out)
	}
}
