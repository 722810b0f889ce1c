package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
)

// TestInheritedFDsStdio: mcp-server started over stdio by a launcher
// that leaves it descriptors without close-on-exec (a directory, a file
// open for appending, a pipe, a socket), as MCP clients and IDEs may,
// hands none of them to its sandboxes: a run_go_code command sees only
// its standard streams, in the session's sandbox and in a handle's, and
// no process of the handle's sandbox holds them.
func TestInheritedFDsStdio(t *testing.T) {
	requireBwrap(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stateDir := seededStateDir(t)
	files, in := localtest.Inherit(t)
	logs := &logSink{}
	cmd := exec.Command(serverBin, serverArgs(t, "--state-dir="+stateDir)...)
	cmd.Stderr = logs
	cmd.ExtraFiles = files
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "descriptors-test", Version: "0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	if err != nil {
		t.Fatalf("start mcp-server: %v\n%s", err, logs.String())
	}
	defer cs.Close()
	// What the test planted is there to leak: mcp-server holds all four.
	if held, err := in.CheckProcess(cmd.Process.Pid); err != nil || len(held) != len(in) {
		t.Fatalf("mcp-server holds %q of the %d planted descriptors (%v): the test would check nothing", held, len(in), err)
	}
	var bad []string
	check := func(where string, out map[string]any) {
		for _, b := range in.CheckCommand(fmt.Sprint(out["stdout"]) + fmt.Sprint(out["stderr"])) {
			bad = append(bad, where+": "+b)
		}
	}
	check("the session's sandbox", callTool(t, ctx, cs, "run_go_code", map[string]any{"command": localtest.ListCommand}))
	id := callTool(t, ctx, cs, "create_sandbox", map[string]any{"ttl_seconds": 120})["sandbox_id"].(string)
	check("a handle's sandbox", callTool(t, ctx, cs, "run_go_code", map[string]any{"sandbox_id": id, "command": localtest.ListCommand}))
	pids, err := localtest.SandboxProcesses(findHandleSandbox(t, stateDir, "stdio", id).Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		found, err := in.CheckProcess(pid)
		if localtest.NotVisible(err) {
			t.Logf("not checked from the host: %v", err)
			continue
		}
		if err != nil {
			t.Error(err)
		}
		bad = append(bad, found...)
	}
	callTool(t, ctx, cs, "delete_sandbox", map[string]any{"sandbox_id": id})
	if len(bad) > 0 {
		t.Errorf("descriptors mcp-server inherited reached its sandboxes:\n%s", strings.Join(bad, "\n"))
	}
}
