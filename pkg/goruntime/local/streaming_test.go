package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// streamingSandbox opens a sandbox and returns it as a StreamingSandbox.
func streamingSandbox(t *testing.T, opts local.Options) (*local.Sandbox, goruntime.StreamingSandbox) {
	t.Helper()
	s := openSession(t, newBackend(t, opts))
	sb, ok := s.Sandbox().(*local.Sandbox)
	if !ok {
		t.Fatalf("sandbox is %T, want *local.Sandbox", s.Sandbox())
	}
	ss, ok := s.Sandbox().(goruntime.StreamingSandbox)
	if !ok {
		t.Fatal("local sandbox does not implement goruntime.StreamingSandbox")
	}
	return sb, ss
}

func TestExecStreamFirstChunkBeforeCommandEnds(t *testing.T) {
	sb, ss := streamingSandbox(t, testOptions())
	marker := filepath.Join(sb.Dir(), "app", "finished")
	var chunks []goruntime.Chunk
	finishedAtFirst := true
	res, err := ss.ExecStream(context.Background(), goruntime.ExecRequest{
		Command: "echo first; sleep 2; touch finished; echo last; echo warn >&2; exit 3",
	}, func(c goruntime.Chunk) {
		if len(chunks) == 0 {
			_, err := os.Stat(marker)
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
	if len(chunks) == 0 || string(chunks[0].Data) != "first\n" || chunks[0].Stream != goruntime.Stdout {
		t.Fatalf("chunks = %q", chunks)
	}
	if res.ExitCode != 3 || res.Stdout != "first\nlast\n" || res.Stderr != "warn\n" {
		t.Fatalf("result = %+v", res)
	}
}

func TestExecStreamTimeoutKillsProcessGroup(t *testing.T) {
	_, ss := streamingSandbox(t, testOptions())
	ctx := context.Background()
	res, err := ss.ExecStream(ctx, goruntime.ExecRequest{
		Command: "sleep 300 & echo $!; sleep 301",
		Timeout: time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("result = %+v, want timed out, exit 124", res)
	}
	child, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("background pid %q: %v", res.Stdout, err)
	}
	// The background child must be gone too (it is reaped by the server).
	check, err := ss.Exec(ctx, goruntime.ExecRequest{
		Command: "for i in $(seq 100); do kill -0 " + strconv.Itoa(child) + " 2>/dev/null || exit 0; sleep 0.05; done; exit 1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if check.ExitCode != 0 {
		t.Fatalf("background child %d still runs after the timeout", child)
	}
}

func TestExecStreamReportsLimits(t *testing.T) {
	opts := testOptions()
	opts.FileSizeBytes = 1 << 20
	opts.OutputBytes = 64 << 10
	_, ss := streamingSandbox(t, opts)
	cases := []struct {
		cmd  string
		want goruntime.Limit
	}{
		{"head -c 2000000 /dev/zero > big", goruntime.LimitFileSize},
		{"head -c 2000000 /dev/zero > big; echo status=$?", goruntime.LimitFileSize},
		{"yes | head -c 1000000", goruntime.LimitOutput},
		{"echo fine", ""},
	}
	for _, tc := range cases {
		var streamed int
		res, err := ss.ExecStream(context.Background(), goruntime.ExecRequest{Command: tc.cmd, Timeout: 30 * time.Second},
			func(c goruntime.Chunk) { streamed += len(c.Data) })
		if err != nil {
			t.Fatalf("%q: %v", tc.cmd, err)
		}
		if res.Limit != tc.want {
			t.Errorf("%q: limit %q (exit %d), want %q", tc.cmd, res.Limit, res.ExitCode, tc.want)
		}
		if streamed > int(opts.OutputBytes)*2 {
			t.Errorf("%q: %d bytes streamed, over the %d-byte cap per stream", tc.cmd, streamed, opts.OutputBytes)
		}
	}
}

func TestSessionExecuteStreamGoProgram(t *testing.T) {
	s := openSession(t, newBackend(t, testOptions()))
	prog := "package main\n\nimport (\n\t\"fmt\"\n\t\"time\"\n)\n\nfunc main() {\n\tfor i := 1; i <= 3; i++ {\n\t\tfmt.Println(\"tick\", i)\n\t\ttime.Sleep(300 * time.Millisecond)\n\t}\n}\n"
	var got []string
	res, err := s.ExecuteStream(context.Background(), goruntime.Request{
		Files:   []goruntime.File{{Path: "main.go", Data: []byte(prog)}},
		Command: "go run main.go",
		Timeout: 3 * time.Minute,
	}, func(c goruntime.Chunk) {
		if c.Stream == goruntime.Stdout {
			got = append(got, string(c.Data))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != goruntime.OutcomeOK || res.Stdout != "tick 1\ntick 2\ntick 3\n" {
		t.Fatalf("outcome %s stdout %q stderr %q", res.Outcome, res.Stdout, res.Stderr)
	}
	// Lines printed 300 ms apart arrive as separate chunks.
	if len(got) < 3 {
		t.Fatalf("stdout came in %d chunks %q, want one per line", len(got), got)
	}
}

// TestExecStreamLongCommand: a command over Linux's 128 KiB argument
// limit streams (processclient splits it), and one over the process API's
// own limit runs through Exec; either way its output reaches onChunk.
func TestExecStreamLongCommand(t *testing.T) {
	_, ss := streamingSandbox(t, testOptions())
	for _, n := range []int{1 << 20, 2 << 20} {
		var streamed strings.Builder
		res, err := ss.ExecStream(context.Background(), goruntime.ExecRequest{
			Command: "echo start; : " + strings.Repeat("a", n) + "\necho end",
			Timeout: 30 * time.Second,
		}, func(c goruntime.Chunk) { streamed.Write(c.Data) })
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if res.Stdout != "start\nend\n" || res.ExitCode != 0 || streamed.String() != res.Stdout {
			t.Fatalf("%d bytes: stdout %q stderr %.300q exit %d streamed %q", n, res.Stdout, res.Stderr, res.ExitCode, streamed.String())
		}
	}
}
