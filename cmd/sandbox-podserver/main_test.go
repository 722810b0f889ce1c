package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessAPIOutOfCommandsReach runs the built binary as a pod runs it
// (PID 1 of a pid namespace, --init --init-guard, the sandboxd API on)
// and has a command stop and kill every process it can (kill -STOP -1,
// kill -9 -1): the sandboxd REST API, served inside PID 1, still answers.
// With the sandbox-processapi companion (cmd/sandbox-server), an ordinary
// process of the commands' uid, the same command stopped it.
func TestProcessAPIOutOfCommandsReach(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare (util-linux) not found; install util-linux")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-podserver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	wrap := []string{unshare, "--pid", "--fork", "--mount-proc"}
	if os.Geteuid() != 0 {
		wrap = append(wrap[:1], append([]string{"--user", "--map-current-user"}, wrap[1:]...)...)
	}
	rest := filepath.Join(dir, "rest.sock")
	args := append(wrap, bin, "--init", "--init-guard", "--addr", "127.0.0.1:0", "--base-dir", filepath.Join(dir, "app"),
		"--home", filepath.Join(dir, "home"), "--grpc-addr", "unix:"+filepath.Join(dir, "grpc.sock"), "--rest-addr", "unix:"+rest)
	cmd := exec.Command(args[0], args[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// unshare's child, the server, ignores every signal but SIGKILL
		// from outside its namespace: kill it, then reap unshare.
		kids, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task", strconv.Itoa(cmd.Process.Pid), "children"))
		for _, f := range strings.Fields(string(kids)) {
			if pid, err := strconv.Atoi(f); err == nil {
				p, _ := os.FindProcess(pid)
				_ = p.Kill()
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Msg == "listening" {
				addr <- strings.TrimPrefix(m.Addr, "tcp:")
			}
		}
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not listen within 30 s")
	}
	restClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", rest)
		}}}
	health := func(when string) {
		t.Helper()
		resp, err := restClient.Get("http://sandboxd/v1/health")
		if err != nil {
			t.Fatalf("%s: GET /v1/health: %v", when, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET /v1/health: %s", when, resp.Status)
		}
	}
	health("before the attack")
	for _, attack := range []string{"kill -STOP -1; echo sent", "kill -9 -1; echo sent"} {
		body := strings.NewReader(`{"command": "` + attack + `"}`)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Post("http://"+base+"/execute", "application/json", body)
		if err != nil {
			t.Fatalf("%s: %v", attack, err)
		}
		resp.Body.Close()
		health("after " + attack)
	}
}
