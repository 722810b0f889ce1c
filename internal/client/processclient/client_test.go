package processclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func TestExecStreamsChunksThenResult(t *testing.T) {
	root := t.TempDir()
	_, client := startServer(t, processapi.Config{RootDir: root})
	var chunks []goruntime.Chunk
	var finishedAtFirst = true
	res, err := Exec(context.Background(), client, goruntime.ExecRequest{
		Command: "echo first; sleep 1; echo oops >&2; touch finished; printf '\\377\\376'; exit 4",
		Env:     map[string]string{"X": "1"},
	}, ExecOptions{}, func(c goruntime.Chunk) {
		if len(chunks) == 0 {
			_, err := os.Stat(filepath.Join(root, "finished"))
			finishedAtFirst = err == nil
		}
		chunks = append(chunks, goruntime.Chunk{Stream: c.Stream, Data: append([]byte(nil), c.Data...)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if finishedAtFirst {
		t.Error("first chunk arrived only after the command had finished")
	}
	if len(chunks) < 2 || chunks[0].Stream != goruntime.Stdout || string(chunks[0].Data) != "first\n" {
		t.Fatalf("chunks = %q", chunks)
	}
	if res.ExitCode != 4 || res.Stdout != "first\n\uFFFD\uFFFD" || res.Stderr != "oops\n" || res.TimedOut {
		t.Fatalf("result = %+v", res)
	}
	if res.Duration <= 0 {
		t.Errorf("duration = %v, want > 0", res.Duration)
	}
}

func TestExecTimeoutKillsGroupAndKeepsOutput(t *testing.T) {
	_, client := startServer(t, processapi.Config{})
	res, err := Exec(context.Background(), client, goruntime.ExecRequest{
		Command: "sleep 300 & echo $!; sleep 301",
		Timeout: 5 * time.Second, // time for a busy machine's shell to print the pid first
	}, ExecOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("result = %+v, want timed out with 124", res)
	}
	child, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("partial output %q: %v", res.Stdout, err)
	}
	waitGone(t, child)
}

func TestExecCapsOutput(t *testing.T) {
	_, client := startServer(t, processapi.Config{})
	var seen int
	res, err := Exec(context.Background(), client, goruntime.ExecRequest{
		Command: "head -c 100000 /dev/zero | tr '\\0' a",
	}, ExecOptions{MaxOutput: 1000}, func(c goruntime.Chunk) { seen += len(c.Data) })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || res.Limit != goruntime.LimitOutput || seen != 1000 {
		t.Fatalf("len %d truncated %v limit %q seen %d", len(res.Stdout), res.StdoutTruncated, res.Limit, seen)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit = %d", res.ExitCode)
	}
}

func TestExecContextCancelled(t *testing.T) {
	_, client := startServer(t, processapi.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Exec(ctx, client, goruntime.ExecRequest{Command: "sleep 300"}, ExecOptions{}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestExecServerGone(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	conn, err := Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Exec(ctx, processv1.NewProcessServiceClient(conn), goruntime.ExecRequest{Command: "true"}, ExecOptions{}, nil)
	if !errors.Is(err, goruntime.ErrSandboxGone) {
		t.Fatalf("err = %v, want ErrSandboxGone", err)
	}
}

// TestCloseStdinTwice: EOF for a stdin that is closed already is not an
// error. The server answers it with Internal "file already closed", as it
// does when a quick command exited and its pipe closed before the client's
// EOF arrived (an agent-sandbox e2e flake: "unpack 1 files: ... sandboxd
// close stdin: ... file already closed").
func TestCloseStdinTwice(t *testing.T) {
	_, client := startServer(t, processapi.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.Start(ctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"sleep", "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetInit() == nil {
		t.Fatalf("first event: %v %v", first, err)
	}
	pid := first.GetInit().GetProcessId()
	for i := range 2 {
		if err := closeStdin(ctx, client, pid); err != nil {
			t.Fatalf("close stdin, time %d: %v", i+1, err)
		}
	}
}
