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
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// companions lists the live process API companions of the server p: its
// children given p's base directory as --root-dir.
func companions(p *proc) []int {
	var pids []int
	for _, pi := range withArg(p.base) {
		if pi.ppid == p.cmd.Process.Pid && pi.state != "Z" {
			pids = append(pids, pi.pid)
		}
	}
	return pids
}

// waitNoCompanion fails unless every pid in pids has exited within 10 s.
func waitGoneAll(t *testing.T, pids []int, p *proc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for procfs.Alive(pid, 0) { // a zombie (exited, not yet waited for) is not alive
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("companion %d still running\n%s", pid, p.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func startWithProcessAPI(t *testing.T, extra ...string) (p *proc, grpcSock, restSock string) {
	t.Helper()
	dir := t.TempDir()
	grpcSock, restSock = filepath.Join(dir, "g.sock"), filepath.Join(dir, "r.sock")
	args := append([]string{"--grpc-addr", "unix:" + grpcSock, "--rest-addr", "unix:" + restSock}, extra...)
	p = startBinary(t, []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}, args...)
	return p, grpcSock, restSock
}

func execOnce(t *testing.T, conn *grpc.ClientConn, cmd string) (*processv1.ExecuteResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return processv1.NewProcessServiceClient(conn).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"/bin/sh", "-c", cmd},
	}})
}

// TestCompanionStartsOnFirstConnection: an idle server runs no companion;
// the first ProcessService call starts one, which serves it.
func TestCompanionStartsOnFirstConnection(t *testing.T) {
	p, grpcSock, _ := startWithProcessAPI(t)
	time.Sleep(200 * time.Millisecond)
	if c := companions(p); len(c) != 0 {
		t.Fatalf("companion %v runs before any connection\n%s", c, p.logs())
	}
	conn, err := processclient.Dial("unix:" + grpcSock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := execOnce(t, conn, "echo hi; pwd")
	if err != nil {
		t.Fatalf("Execute: %v\n%s", err, p.logs())
	}
	if string(res.Stdout) != "hi\n"+p.base+"\n" || res.ExitCode != 0 {
		t.Fatalf("got %q exit %d", res.Stdout, res.ExitCode)
	}
	if c := companions(p); len(c) != 1 {
		t.Fatalf("companions after a call: %v, want one\n%s", c, p.logs())
	}
}

// TestCompanionKilledRestartsOnNextCall: a companion killed with SIGKILL
// (by a command, say) is replaced on the next call, over the same client
// connection.
func TestCompanionKilledRestartsOnNextCall(t *testing.T) {
	p, grpcSock, restSock := startWithProcessAPI(t)
	conn, err := processclient.Dial("unix:" + grpcSock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := execOnce(t, conn, "true"); err != nil {
		t.Fatalf("Execute: %v\n%s", err, p.logs())
	}
	first := companions(p)
	if len(first) != 1 {
		t.Fatalf("companions %v, want one", first)
	}
	// A command kills the process that runs it.
	_, _ = execOnce(t, conn, "kill -KILL $PPID; sleep 5")
	waitGoneAll(t, first, p)

	var res *processv1.ExecuteResponse
	for i := 0; ; i++ {
		// The first call after the kill may meet the broken connection.
		if res, err = execOnce(t, conn, "echo again"); err == nil || i == 2 {
			break
		}
	}
	if err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("call after the companion was killed: %v %v\n%s", res, err, p.logs())
	}
	second := companions(p)
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("companions %v after restart, first was %v", second, first)
	}
	// REST reaches the new companion too.
	if code, body := restGet(t, restSock, "/v1/health"); code != 200 {
		t.Fatalf("health = %d %s", code, body)
	}
	if !strings.Contains(p.logs(), "restarts on the next connection") {
		t.Fatalf("the server did not log the companion's exit:\n%s", p.logs())
	}
}

// TestCompanionStopsWithServer: SIGTERM to the server stops the companion
// too, and SIGKILL to the server kills it (its parent-death signal).
func TestCompanionStopsWithServer(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			p, _, restSock := startWithProcessAPI(t)
			if code, body := restGet(t, restSock, "/v1/health"); code != 200 {
				t.Fatalf("health = %d %s\n%s", code, body, p.logs())
			}
			c := companions(p)
			if len(c) != 1 {
				t.Fatalf("companions %v, want one", c)
			}
			_ = p.cmd.Process.Signal(sig)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				for _, pid := range c {
					_ = syscall.Kill(pid, syscall.SIGKILL) // it holds the log pipe open
				}
				t.Fatalf("server (or its companion, holding its stderr) did not exit on %v\n%s", sig, p.logs())
			}
			if sig == syscall.SIGTERM && p.status.ExitCode() != 0 {
				t.Fatalf("server exit %v\n%s", p.status, p.logs())
			}
			// The companion's parent is gone, so nobody reaps it: wait
			// until it is gone or a zombie of init's.
			waitGoneAll(t, c, p)
		})
	}
}

// TestCompanionMissingFailsStartup: with --grpc-addr set, a server whose
// companion cannot be found does not start, and says how to fix it.
func TestCompanionMissingFailsStartup(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(t.TempDir(), "sandbox-server")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, argv := range map[string][]string{
		"next to the server": {lone},
		"flag":               {bin, "--process-api-bin", filepath.Join(dir, "no-such-companion")},
	} {
		cmd := exec.Command(argv[0], append(argv[1:], "--addr", "unix:"+filepath.Join(dir, "s.sock"),
			"--base-dir", filepath.Join(dir, "app"), "--grpc-addr", "unix:"+filepath.Join(dir, "g.sock"))...)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Fatalf("%s: exit %v, want 1\n%s", name, cmd.ProcessState, out)
		}
		for _, want := range []string{ProcessAPIName, "--process-api-bin", "SANDBOX_PROCESS_API_BIN"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("%s: output does not name %q:\n%s", name, want, out)
			}
		}
	}
}

// TestCompanionVanishedRefusesClients: a companion that disappears after
// startup (a broken image) fails the client at once, naming the binary.
func TestCompanionVanishedRefusesClients(t *testing.T) {
	companion, err := processAPIBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(companion)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), ProcessAPIName)
	if err := os.WriteFile(copyPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	p, grpcSock, restSock := startWithProcessAPI(t, "--process-api-bin", copyPath)
	if err := os.Remove(copyPath); err != nil {
		t.Fatal(err)
	}
	code, body := restGet(t, restSock, "/v1/health")
	if code != 503 || !strings.Contains(string(body), copyPath) {
		t.Fatalf("health = %d %s, want 503 naming %s\n%s", code, body, copyPath, p.logs())
	}
	conn, err := processclient.Dial("unix:" + grpcSock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := execOnce(t, conn, "true"); err == nil {
		t.Fatal("Execute worked without a companion")
	} else if status.Code(err) == codes.DeadlineExceeded {
		t.Fatalf("Execute failed only at the caller's deadline: %v", err)
	}
	if !strings.Contains(p.logs(), "cannot start the process API companion") {
		t.Fatalf("the server did not log why:\n%s", p.logs())
	}
}

// restGet gets path from the REST API on unix socket sock.
func restGet(t *testing.T, sock, path string) (int, []byte) {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://sandboxd" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// BenchmarkFirstProcessAPICall is what the companion costs the first
// ProcessService call of a server (it starts on that connection) against
// a later call over a fresh connection, which finds it running:
// first-call-ms and later-call-ms per server.
func BenchmarkFirstProcessAPICall(b *testing.B) {
	var first, later time.Duration
	n := 0
	for b.Loop() {
		dir := b.TempDir()
		grpcSock := filepath.Join(dir, "g.sock")
		p := startBinary(b, []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}, "--grpc-addr", "unix:"+grpcSock)
		for i := range 2 {
			conn, err := processclient.Dial("unix:" + grpcSock)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = processv1.NewProcessServiceClient(conn).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"/bin/true"}}})
			cancel()
			conn.Close()
			if err != nil {
				b.Fatalf("Execute: %v\n%s", err, p.logs())
			}
			if i == 0 {
				first += time.Since(start)
			} else {
				later += time.Since(start)
			}
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		n++
	}
	b.ReportMetric(float64(first.Microseconds())/1000/float64(n), "first-call-ms")
	b.ReportMetric(float64(later.Microseconds())/1000/float64(n), "later-call-ms")
}

// TestCompanionGetsTheServersLogLevel: the companion gets the level the
// server settled on: an invalid --log-level falls back to info for both
// (the companion would refuse the invalid value and fail every call).
func TestCompanionGetsTheServersLogLevel(t *testing.T) {
	p, _, restSock := startWithProcessAPI(t, "--log-level", "bogus")
	if code, body := restGet(t, restSock, "/v1/health"); code != 200 {
		t.Fatalf("health = %d %s\n%s", code, body, p.logs())
	}
	// The companion logs "sandboxd listening" at info once it serves.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.logs(), `"component":"sandbox-processapi"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no info line from the companion:\n%s", p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
