package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSignalAnswersCallsInFlight: SIGINT or SIGTERM to the stdio server
// while a run_go_code call runs stops the call and answers it with an
// error saying why (it used to go unanswered, with an ERROR in the log),
// and the process exits 0 promptly, its sandbox closed.
func TestSignalAnswersCallsInFlight(t *testing.T) {
	requireBwrap(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			logs := &logSink{}
			cmd := exec.Command(serverBin, serverArgs(t, "--log-level=info")...)
			cmd.Stderr = logs
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).
				Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, logs.String())
			}
			defer cs.Close()
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "echo started > started.txt; sleep 60"}})
				done <- answer{res, err}
			}()
			// Wait until the command runs: the sandbox is open and the call's
			// command had time to start.
			deadline := time.Now().Add(2 * time.Minute)
			for !strings.Contains(logs.String(), "sandbox ready") {
				if time.Now().After(deadline) {
					t.Fatalf("no sandbox opened:\n%s", logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(time.Second)
			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var a answer
			select {
			case a = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("the call in flight got no answer 30 s after %s:\n%s", sig, logs.String())
			}
			if a.err != nil || a.res == nil || !a.res.IsError || len(a.res.Content) == 0 {
				t.Fatalf("answer after %s = %+v, %v; want a tool error\n%s", sig, a.res, a.err, logs.String())
			}
			if text := a.res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "shutting down") {
				t.Errorf("answer text %q does not say the server is shutting down", text)
			}
			// The client's Close waits for the process (it exited already).
			_ = cs.Close()
			t.Logf("%s: answered, %v after %s", sig, cmd.ProcessState, time.Since(sent).Round(time.Millisecond))
			if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
				t.Errorf("mcp-server after %s: %v, want exit status 0\n%s", sig, cmd.ProcessState, logs.String())
			}
			if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "sandbox closed") {
				t.Errorf("want no ERROR and the sandbox closed in the log:\n%s", logs.String())
			}
		})
	}
}
