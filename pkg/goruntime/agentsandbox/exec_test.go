package agentsandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// These tests run commands through the backend against a real runtime
// server: the sandboxd process API (internal/sandboxd, as cmd/sandbox-server
// serves it in every pod) on loopback, reached as the pod IP.

func openProcessSandbox(t *testing.T) (*Sandbox, *router) {
	t.Helper()
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, func(o *Options) { o.MaxExecTimeout = time.Minute })
	sb, err := b.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return sb.(*Sandbox), r
}

func TestExecProcessAPIWorkingDir(t *testing.T) {
	sb, _ := openProcessSandbox(t)
	ctx := t.Context()
	if res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "mkdir -p 'sub dir/deeper'"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir: %+v %v", res, err)
	}
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "pwd", Dir: "sub dir/deeper"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Stdout, "/sub dir/deeper\n") {
		t.Fatalf("pwd in Dir %q = %q", "sub dir/deeper", res.Stdout)
	}
	for dir, want := range map[string]error{"../outside": goruntime.ErrPathEscape, "/etc": goruntime.ErrPathEscape, "missing": goruntime.ErrNotExist} {
		if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "pwd", Dir: dir}); !errors.Is(err, want) {
			t.Errorf("Dir %q: err = %v, want %v", dir, err, want)
		}
	}
}

func TestExecProcessAPILongCommand(t *testing.T) {
	sb, _ := openProcessSandbox(t)
	// 300 KiB: over Linux's 128 KiB limit on one argument.
	var b strings.Builder
	b.WriteString("n=0\n")
	for b.Len() < 300<<10 {
		b.WriteString("n=$((n+1)) # padding padding padding padding padding padding\n")
	}
	b.WriteString(`echo "lines $n"; env | grep -c GORUNTIME_CMD_PART_ || true`)
	cmd := b.String()
	res, err := sb.Exec(t.Context(), goruntime.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec of a %d-byte command: %v", len(cmd), err)
	}
	want := strings.Count(cmd, "n=$((n+1))")
	if got := res.Stdout; got != "lines "+strconv.Itoa(want)+"\n0\n" || res.ExitCode != 0 {
		t.Fatalf("Exec of a %d-byte command = %+v, want lines %d and no leftover pieces", len(cmd), res, want)
	}
	huge := strings.Repeat("#", 2<<20)
	if _, err := sb.Exec(t.Context(), goruntime.ExecRequest{Command: huge}); !errors.Is(err, goruntime.ErrTooLarge) {
		t.Fatalf("Exec of a 2 MiB command: err = %v, want ErrTooLarge", err)
	}
}

func TestExecProcessAPIStdinAndSignals(t *testing.T) {
	sb, _ := openProcessSandbox(t)
	ctx := t.Context()
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "tr a-z A-Z", Stdin: strings.NewReader("hello\nworld\n")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "HELLO\nWORLD\n" {
		t.Fatalf("stdin through tr = %q", res.Stdout)
	}
	for _, tc := range []struct {
		sig      syscall.Signal
		command  string
		wantCode int
		wantOut  string
	}{
		// A trapping shell sees SIGINT and says so.
		{syscall.SIGINT, `trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.1; done`, 7, "ready\ngot INT\n"},
		{syscall.SIGTERM, `echo ready; exec sleep 30`, 128 + 15, "ready\n"},
		{syscall.SIGKILL, `trap '' TERM INT; echo ready; exec sleep 30`, 128 + 9, "ready\n"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			sigs := make(chan syscall.Signal, 1)
			res, err := sb.ExecStream(ctx, goruntime.ExecRequest{Command: tc.command, Signals: sigs, Timeout: 20 * time.Second},
				func(c goruntime.Chunk) {
					if bytes.Contains(c.Data, []byte("ready")) {
						sigs <- tc.sig
					}
				})
			if err != nil {
				t.Fatal(err)
			}
			// A signal that did not end the command leaves it to its 20 s
			// timeout (TimedOut, exit 124), whatever the machine's speed.
			if res.ExitCode != tc.wantCode || res.Stdout != tc.wantOut || res.TimedOut {
				t.Fatalf("after %s: %+v, want exit %d, stdout %q", tc.sig, res, tc.wantCode, tc.wantOut)
			}
		})
	}
}

func TestExecProcessAPIStreamsFirstChunkEarly(t *testing.T) {
	sb, _ := openProcessSandbox(t)
	var got strings.Builder
	res, err := sb.ExecStream(t.Context(), goruntime.ExecRequest{Command: releasedCommand("one", "two")}, func(c goruntime.Chunk) {
		if got.Len() == 0 {
			release(t, sb)
		}
		got.Write(c.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "one\ntwo\n" || res.Stdout != "one\ntwo\n" {
		t.Fatalf("streamed %q, result %q: the first chunk did not come before the command's end", got.String(), res.Stdout)
	}
}

// releasedCommand prints first, then waits for the file "released" (a
// minute at most) and prints then if it came, "never" if not: a command
// that can end with then only once its first output was delivered
// (release), however slowly a busy machine delivers it.
func releasedCommand(first, then string) string {
	return "echo " + first + "; i=0; while [ ! -e released ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; if [ -e released ]; then echo " + then + "; else echo never; fi"
}

// release creates the file releasedCommand waits for, from a goroutine
// (a chunk callback must not block the stream).
func release(t *testing.T, sb goruntime.Sandbox) {
	go func() {
		if err := sb.WriteFile(context.Background(), "released", strings.NewReader("")); err != nil {
			t.Errorf("write the release file: %v", err)
		}
	}()
}

func TestExecRouterRefusesProcessAPIFields(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, func(o *Options) { o.Connectivity = ConnectivityRouter })
	sb, err := b.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]goruntime.ExecRequest{
		"stdin":   {Command: "cat", Stdin: strings.NewReader("x")},
		"signals": {Command: "true", Signals: make(chan syscall.Signal)},
		"dir":     {Command: "pwd", Dir: "sub"},
	} {
		if _, err := sb.Exec(t.Context(), req); err == nil || !strings.Contains(err.Error(), "process API") {
			t.Errorf("%s through the router: err = %v, want a refusal naming the process API", name, err)
		}
	}
	// A 300 KiB command goes through the legacy contract too.
	cmd := "echo ok #" + strings.Repeat("x", 300<<10)
	res, err := sb.Exec(t.Context(), goruntime.ExecRequest{Command: cmd})
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("300 KiB command through the router: %+v, %v", res, err)
	}
}

func TestHealthAndMetadata(t *testing.T) {
	t.Setenv("SANDBOX_REGION", "test-region")
	t.Setenv("SANDBOX_API_TOKEN", "hidden")
	sb, _ := openProcessSandbox(t)
	h, err := sb.Health(t.Context())
	if err != nil || h.Status != "ok" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	md, err := sb.Metadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if md.Env["SANDBOX_REGION"] != "test-region" {
		t.Errorf("Metadata.Env = %v, want SANDBOX_REGION", md.Env)
	}
	if _, ok := md.Env["SANDBOX_API_TOKEN"]; ok {
		t.Errorf("Metadata shows a secret-looking variable: %v", md.Env)
	}
}

// TestSessionExecuteStreamOverBackend: the Session API the MCP server and
// the demo (--live) use streams on this backend as it does locally.
func TestSessionExecuteStreamOverBackend(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	b := newBackend(t, c, newRouter(t), nil)
	ctx := t.Context()
	s, err := goruntime.Open(ctx, b, goruntime.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var streamed strings.Builder
	res, err := s.ExecuteStream(ctx, goruntime.Request{Command: releasedCommand("early", "late >&2")}, func(c goruntime.Chunk) {
		if streamed.Len() == 0 {
			release(t, s.Sandbox())
		}
		streamed.Write(c.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "early\n" || res.Stderr != "late\n" {
		t.Fatalf("ExecuteStream = %+v: the first chunk did not come before the command's end", res)
	}
}

// TestExplainRPCPortForwardHint: a process API that cannot be reached
// over a port-forward (what every gVisor pod gives: runsc refuses
// port-forwards) is reported as ErrSandboxGone with the connectivity
// that works; over the pod IP the hint is not given.
func TestExplainRPCPortForwardHint(t *testing.T) {
	unreachable := fmt.Errorf("sandboxd execute: %w: %w", goruntime.ErrSandboxGone,
		status.Error(codes.Unavailable, "connection error: desc = \"error reading server preface: EOF\""))
	for conn, wantHint := range map[string]bool{ConnectivityPortForward: true, ConnectivityInClusterPodIP: false} {
		s := &Sandbox{b: &Backend{opts: Options{Connectivity: conn}}, id: "go-runtime-pool-x"}
		err := s.explainRPC(unreachable)
		if !errors.Is(err, goruntime.ErrSandboxGone) {
			t.Errorf("%s: %v does not wrap ErrSandboxGone", conn, err)
		}
		if got := strings.Contains(err.Error(), "Options.Connectivity="+ConnectivityInClusterPodIP); got != wantHint {
			t.Errorf("%s: hint given = %v, want %v: %v", conn, got, wantHint, err)
		}
	}
}

// TestSessionFilesInOneRequest: a Session sends a call's files to the
// runtime server's /unpack in one request where the connectivity reaches
// the pod (in-cluster-pod-ip here), and falls back to an uploaded tar
// that tar unpacks where it does not (router): the files land either
// way, and bad input is refused the same way.
func TestSessionFilesInOneRequest(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	for _, tc := range []struct {
		conn      string
		want, not string
	}{
		{ConnectivityInClusterPodIP, "POST /unpack", "POST /upload"},
		{ConnectivityRouter, "POST /upload", "POST /unpack"},
	} {
		t.Run(tc.conn, func(t *testing.T) {
			r := newRouter(t)
			b := newBackend(t, c, r, func(o *Options) { o.Connectivity = tc.conn })
			sb, err := b.Open(t.Context())
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			sess := goruntime.NewSession(sb, goruntime.Options{})
			res, err := sess.Execute(t.Context(), goruntime.Request{
				Files:   []goruntime.File{{Path: "a/b.txt", Data: []byte("one")}, {Path: "c.sh", Data: []byte("echo two"), Mode: 0o755}},
				Command: "cat a/b.txt && ./c.sh",
			})
			if err != nil || res.ExitCode != 0 || res.Stdout != "onetwo\n" {
				t.Fatalf("Execute with files: %v %+v", err, res)
			}
			if !r.sawPath(tc.want) || r.sawPath(tc.not) {
				t.Errorf("files went by %v; want %q and no %q", r.paths, tc.want, tc.not)
			}
			_, err = sess.Execute(t.Context(), goruntime.Request{
				Files:   []goruntime.File{{Path: "big.bin", Data: make([]byte, 2<<20)}},
				Command: "true",
			})
			if !errors.Is(err, goruntime.ErrTooLarge) {
				t.Errorf("files over the server's upload limit: %v, want ErrTooLarge", err)
			}
		})
	}
}
