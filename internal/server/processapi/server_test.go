package processapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// startServer serves both APIs on loopback TCP with a fresh root.
func startServer(t *testing.T, cfg Config) (*Server, processv1.ProcessServiceClient) {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.RESTAddr == "" {
		cfg.RESTAddr = "127.0.0.1:0"
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	conn, err := dial(srv.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-srv.Done()
	})
	return srv, processv1.NewProcessServiceClient(conn)
}

func sh(cmd string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", cmd}}
}

// waitGone polls until pid has exited, failing after 10 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for procfs.Alive(pid, 0) {
		if time.Now().After(deadline) {
			_ = syscallKill(pid)
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// recvAll reads a Start stream to its end.
func recvAll(t *testing.T, st processv1.ProcessService_StartClient) (stdout, stderr string, exit int32) {
	t.Helper()
	exit = -999
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return stdout, stderr, exit
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		switch e := ev.GetEvent().(type) {
		case *processv1.StartResponse_Stdout:
			stdout += string(e.Stdout)
		case *processv1.StartResponse_Stderr:
			stderr += string(e.Stderr)
		case *processv1.StartResponse_Exit:
			exit = e.Exit.GetExitCode()
		}
	}
}

func TestStartStreamsFirstChunkBeforeCommandEnds(t *testing.T) {
	root := t.TempDir()
	_, client := startServer(t, Config{RootDir: root})
	st, err := client.Start(context.Background(), &processv1.StartRequest{
		Config: sh("echo first; sleep 2; touch finished; echo last"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := st.Recv(); err != nil || ev.GetInit() == nil {
		t.Fatalf("first event = %v, %v; want init", ev, err)
	}
	ev, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ev.GetStdout()); got != "first\n" {
		t.Fatalf("first output event = %v, want stdout %q", ev, "first\n")
	}
	// The command marks its end with a file: it must not exist yet.
	if _, err := os.Stat(filepath.Join(root, "finished")); err == nil {
		t.Fatal("first chunk arrived only after the command had finished")
	}
	stdout, _, exit := recvAll(t, st)
	if stdout != "last\n" || exit != 0 {
		t.Fatalf("rest = %q exit %d, want %q exit 0", stdout, exit, "last\n")
	}
}

func TestSendSignalTermStopsWholeProcessGroup(t *testing.T) {
	_, client := startServer(t, Config{})
	ctx := context.Background()
	// The shell starts a background child and waits on a foreground one:
	// SIGTERM to the group must end all three.
	st, err := client.Start(ctx, &processv1.StartRequest{Config: sh("sleep 300 & echo $!; sleep 301")})
	if err != nil {
		t.Fatal(err)
	}
	initEv, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(ev.GetStdout())))
	if err != nil {
		t.Fatalf("background pid: %v (event %v)", err, ev)
	}
	if _, err := client.SendSignal(ctx, &processv1.SendSignalRequest{
		ProcessId: initEv.GetInit().GetProcessId(), Signal: processv1.Signal_SIGNAL_SIGTERM,
	}); err != nil {
		t.Fatalf("SendSignal: %v", err)
	}
	_, _, exit := recvAll(t, st)
	if exit != 128+15 {
		t.Errorf("exit code = %d, want 143 (128+SIGTERM)", exit)
	}
	waitGone(t, child)
}

func TestClientGoneKillsWholeProcessGroup(t *testing.T) {
	_, client := startServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := client.Start(ctx, &processv1.StartRequest{Config: sh("sleep 300 & echo $!; wait")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(ev.GetStdout())))
	if err != nil {
		t.Fatalf("background pid: %v", err)
	}
	cancel()
	waitGone(t, child)
}

func TestExecuteBuffersOutputClosesStdinAndMapsSignals(t *testing.T) {
	_, client := startServer(t, Config{Env: map[string]string{"A": "base", "B": "base"}})
	ctx := context.Background()
	cases := []struct {
		name, cmd      string
		env            map[string]string
		stdout, stderr string
		exit           int32
	}{
		{"output and exit code", "echo out; echo err >&2; exit 3", nil, "out\n", "err\n", 3},
		{"stdin is at EOF", "cat; echo done", nil, "done\n", "", 0},
		{"signal death is 128+N", "kill -TERM $$", nil, "", "", 143},
		{"config env under request env", `echo "$A $B"`, map[string]string{"B": "req"}, "base req\n", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sh(tc.cmd)
			cfg.EnvVars = tc.env
			res, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr || res.ExitCode != tc.exit {
				t.Fatalf("got %q %q exit %d; want %q %q exit %d",
					res.Stdout, res.Stderr, res.ExitCode, tc.stdout, tc.stderr, tc.exit)
			}
		})
	}
}

func TestProcessErrorsKeepUpstreamCodes(t *testing.T) {
	_, client := startServer(t, Config{})
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"execute without command", func() error {
			_, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{}})
			return err
		}, codes.InvalidArgument},
		{"execute missing binary", func() error {
			_, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"/no/such/binary"}}})
			return err
		}, codes.NotFound},
		{"execute cwd escaping root", func() error {
			cwd := "../.."
			_, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"true"}, Cwd: &cwd}})
			return err
		}, codes.PermissionDenied},
		{"signal unknown process", func() error {
			_, err := client.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: 4242, Signal: processv1.Signal_SIGNAL_SIGTERM})
			return err
		}, codes.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Fatalf("code = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMetadataShowsPrefixedNonSecretEnv(t *testing.T) {
	t.Setenv("GRS_TEST_VISIBLE", "yes")
	t.Setenv("GRS_TEST_API_TOKEN", "hidden")
	srv, _ := startServer(t, Config{MetadataEnvPrefix: "GRS_TEST_"})
	resp, err := http.Get("http://" + srv.RESTAddr() + "/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Env map[string]string }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Env["GRS_TEST_VISIBLE"] != "yes" || len(got.Env) != 1 {
		t.Fatalf("metadata env = %v, want only GRS_TEST_VISIBLE", got.Env)
	}
}

func TestCloseEndsRunningCommandsAndHealth(t *testing.T) {
	srv, client := startServer(t, Config{})
	st, err := client.Start(context.Background(), &processv1.StartRequest{Config: sh("sleep 300")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	restAddr := srv.RESTAddr()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	// The running command gets SIGTERM, so its stream ends with an exit event.
	_, _, exit := recvAll(t, st)
	if exit != 143 {
		t.Fatalf("exit = %d, want 143", exit)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Get("http://" + restAddr + "/v1/health"); err == nil {
		t.Fatal("REST still answers after Close")
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{RootDir: dir}, "neither"},
		{"no root", Config{GRPCAddr: "127.0.0.1:0"}, "root directory is required"},
		{"same address", Config{RootDir: dir, GRPCAddr: "unix:/tmp/x.sock", RESTAddr: "unix:/tmp/x.sock"}, "must differ"},
		{"bad env name", Config{RootDir: dir, GRPCAddr: "127.0.0.1:0", Env: map[string]string{"A=B": "x"}}, "invalid"},
		{"negative chunk", Config{RootDir: dir, GRPCAddr: "127.0.0.1:0", StreamChunkSize: -1}, "negative"},
		{"address without port", Config{RootDir: dir, GRPCAddr: "localhost"}, "want host:port or unix:/path"},
		{"empty unix path", Config{RootDir: dir, RESTAddr: "unix:"}, "empty unix socket path"},
		{"unix path is a regular file", Config{RootDir: dir, GRPCAddr: "unix:" + regular}, "not a socket"},
		{"root is a file", Config{RootDir: regular, GRPCAddr: "127.0.0.1:0"}, "root directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Start(context.Background(), tc.cfg)
			if err == nil {
				_ = srv.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// The regular file survived the refused listen.
	if _, err := os.Stat(regular); err != nil {
		t.Fatalf("regular file lost: %v", err)
	}
}

// recordingTracker records the ChildTracker calls it gets.
type recordingTracker struct {
	mu      sync.Mutex
	holding int
	started []int
	exited  []int
}

func (r *recordingTracker) Starting() func(int) {
	r.mu.Lock()
	r.holding++
	r.mu.Unlock()
	return func(pid int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.holding--
		r.started = append(r.started, pid)
	}
}

func (r *recordingTracker) Exited(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exited = append(r.exited, pid)
}

func TestChildTrackerHearsOfEveryCommand(t *testing.T) {
	tr := &recordingTracker{}
	_, client := startServer(t, Config{Children: tr})
	ctx := context.Background()
	res, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: sh("echo $$")})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("pid output %q: %v", res.Stdout, err)
	}
	if _, err := client.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"/no/such/binary"}}}); err == nil {
		t.Fatal("missing binary ran")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.holding != 0 {
		t.Errorf("%d Starting calls never released", tr.holding)
	}
	if fmt.Sprint(tr.started) != fmt.Sprint([]int{pid, 0}) || fmt.Sprint(tr.exited) != fmt.Sprint([]int{pid}) {
		t.Fatalf("started %v exited %v; want started [%d 0] exited [%d]", tr.started, tr.exited, pid, pid)
	}
}
