package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

const helloMain = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"

// mcpSection compares a warm run_go_code call of hello world through the
// built mcp-server over stdio with the same request through the library
// (Session.Execute, in process) and with `go run main.go` on the bare
// host, interleaved; then, with that server and backend closed, the first
// call of a fresh server (firstCallFigure).
func (r *runner) mcpSection(ctx context.Context) error {
	if err := r.warmMCPFigures(ctx); err != nil {
		return err
	}
	return r.firstCallFigure(ctx)
}

// warmMCPFigures are mcpSection's warm calls.
func (r *runner) warmMCPFigures(ctx context.Context) error {
	b, err := r.newLocal(ctx, local.Options{})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	lib, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		return err
	}
	defer lib.Close(context.WithoutCancel(ctx))

	cs, logs, err := r.startMCPStdio(ctx)
	if err != nil {
		return err
	}
	defer cs.Close()

	host, err := os.MkdirTemp("", "bench-host-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(host)
	if err := writeModule(host, map[string]string{"main.go": helloMain}); err != nil {
		return err
	}
	const command = "go run main.go"
	hello := []goruntime.File{{Path: "main.go", Data: []byte(helloMain)}}
	viaMCP := func() (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{
			"files": map[string]string{"main.go": helloMain}, "command": command}})
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("run_go_code: %w (mcp-server log: %s)", err, logs.String())
		}
		var out struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		data, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(data, &out) != nil || res.IsError || out.Stdout != "hello, world\n" {
			return 0, fmt.Errorf("run_go_code: unexpected result %s", data)
		}
		return d, nil
	}
	viaLib := func() (time.Duration, error) {
		return execOK(ctx, lib, goruntime.Request{Files: hello, Command: command})
	}
	bare := func() (time.Duration, error) { return hostRun(ctx, host, command) }
	s, err := interleaved(r.cfg.Rounds*2, viaMCP, viaLib, bare)
	if err != nil {
		return err
	}
	m, l, h := s[0].p50(), s[1].p50(), s[2].p50()
	fig := "warm run_go_code hello world (`go run main.go`), p50"
	r.add(Row{Section: "mcp", Figure: fig, Ours: ms(m), Baseline: "bare host go run: " + ms(h), Ratio: ratio(m, h), Target: "<= 1.05"})
	r.add(Row{Section: "mcp", Figure: fig, Ours: ms(m), Baseline: "library Session.Execute: " + ms(l), Ratio: ratio(m, l)})
	r.add(Row{Section: "mcp", Figure: "library Session.Execute hello world, p50", Ours: ms(l), Baseline: "bare host go run: " + ms(h), Ratio: ratio(l, h)})
	return nil
}

// firstCallFigure times the first run_go_code of a freshly started
// mcp-server, called as soon as initialize returns (a client's first
// call: the server's warm pool is still filling), against the bare host
// running the same new code, interleaved; each round a new server and new
// code on both sides. Each server is the state directory's only backend,
// as a new user's is: the last to close removes the spare disks, so no
// round starts on disks an earlier one left (a backend of the bench's
// own, kept open, gave each round's first start a ready disk). It splits
// the call into the command (the runtime server's clock: the fresh
// sandbox's first `go run`) and the rest (the wait for the sandbox's
// start, the call around the command).
func (r *runner) firstCallFigure(ctx context.Context) error {
	round := 0
	var command durations // each round's command, the server's clock
	first := func() (time.Duration, error) {
		round++
		cs, logs, err := r.startMCPStdio(ctx)
		if err != nil {
			return 0, err
		}
		defer cs.Close()
		files := map[string]string{}
		for p, c := range smallModule(7000 + round) {
			files[p] = c
		}
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"files": files, "command": "go run ."}})
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("first run_go_code: %w (mcp-server log: %s)", err, logs.String())
		}
		if res.IsError {
			data, _ := json.Marshal(res.Content)
			return 0, fmt.Errorf("first run_go_code: an error result %s (mcp-server log: %s)", data, logs.String())
		}
		var out struct {
			DurationMS int64 `json:"duration_ms"`
		}
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, &out); err != nil {
			return 0, fmt.Errorf("first run_go_code: result %s: %w", data, err)
		}
		command = append(command, time.Duration(out.DurationMS)*time.Millisecond)
		return d, nil
	}
	bare := func() (time.Duration, error) {
		dir, err := os.MkdirTemp("", "bench-host-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		if err := writeModule(dir, smallModule(8000+round)); err != nil {
			return 0, err
		}
		return hostRun(ctx, dir, "go run .")
	}
	s, err := interleaved(r.cfg.Rounds, first, bare)
	if err != nil {
		return err
	}
	f, h := s[0].p50(), s[1].p50()
	r.add(Row{Section: "mcp", Figure: "first run_go_code of new code right after initialize (a fresh mcp-server), p50", Ours: ms(f),
		Baseline: "bare host go run of new code: " + ms(h), Ratio: ratio(f, h), Target: "<= 1.2"})
	command = command[len(command)-len(s[0]):] // the counted rounds: the warm-up round's is first
	c := command.p50()
	r.add(Row{Section: "mcp", Figure: "first run_go_code: its command, the fresh sandbox's first `go run .` (server's clock), p50", Ours: ms(c),
		Baseline: "bare host go run of new code: " + ms(h), Ratio: ratio(c, h)})
	r.add(Row{Section: "mcp", Figure: "first run_go_code: the rest (the wait for the sandbox's start, the call), p50 per round", Ours: ms(added(s[0], command).p50()),
		Baseline: "the whole call: " + ms(f)})
	return nil
}

// startMCPStdio starts the built mcp-server over stdio (the bench's state
// directory, warnings logged) and returns the initialized client session
// and the server's log.
func (r *runner) startMCPStdio(ctx context.Context) (*mcp.ClientSession, *strings.Builder, error) {
	logs := new(strings.Builder)
	cmd := exec.Command(r.bins["mcp-server"], "--log-level=warn")
	if r.cfg.StateDir != "" {
		cmd.Args = append(cmd.Args, "--state-dir="+r.cfg.StateDir)
	}
	cmd.Stderr = logs
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("start mcp-server: %w (its log: %s)", err, logs)
	}
	return cs, logs, nil
}
