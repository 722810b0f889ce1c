package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
)

// Target is a server to test.
type Target struct {
	// Name describes the target in reports ("stdio", "http").
	Name string
	// Connect opens a new MCP session. Over stdio that is a new server
	// process (and sandbox); over HTTP a new session on the same server.
	Connect func(ctx context.Context, opts *mcp.ClientOptions) (*mcp.ClientSession, error)
	// SharedServer reports that sessions from Connect share one server,
	// so the isolation scenario applies.
	SharedServer bool
}

// Scenario is one end-to-end check.
type Scenario struct {
	Name string
	// HTTPOnly scenarios need sessions sharing one server.
	HTTPOnly bool
	Run      func(ctx context.Context, t Target) error
}

// Scenarios returns every scenario, in a sensible order to run them.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "single-file", Run: singleFile},
		{Name: "build-then-rerun", Run: buildThenRerun},
		{Name: "module-with-subpackage", Run: moduleWithSubpackage},
		{Name: "compile-error", Run: compileError},
		{Name: "timeout", Run: timeout},
		{Name: "cancellation", Run: cancellation},
		{Name: "both-streams-then-second-call", Run: bothStreams},
		{Name: "huge-output-capped", Run: hugeOutput},
		{Name: "read-list-reset", Run: readListReset},
		{Name: "sessions-isolated", HTTPOnly: true, Run: sessionsIsolated},
	}
}

// Output mirrors run_go_code's structured result.
type Output struct {
	ExitCode          int    `json:"exit_code"`
	Outcome           string `json:"outcome"`
	Stdout            string `json:"stdout"`
	Stderr            string `json:"stderr"`
	DurationMS        int64  `json:"duration_ms"`
	TimedOut          bool   `json:"timed_out"`
	StdoutTruncated   bool   `json:"stdout_truncated"`
	StderrTruncated   bool   `json:"stderr_truncated"`
	StdoutElidedBytes int    `json:"stdout_elided_bytes"`
	SandboxID         string `json:"sandbox_id"`
}

// Run is one run_go_code result.
type Run struct {
	Out     Output
	IsError bool
	Text    string
}

// RunGo calls run_go_code. files may be nil; timeout 0 leaves the default.
func RunGo(ctx context.Context, cs *mcp.ClientSession, files map[string]string, command string, timeout float64) (*Run, error) {
	args := map[string]any{"command": command}
	if files != nil {
		args["files"] = files
	}
	if timeout > 0 {
		args["timeout_seconds"] = timeout
	}
	return runParams(ctx, cs, &mcp.CallToolParams{Name: "run_go_code", Arguments: args})
}

func runParams(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) (*Run, error) {
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("run_go_code %v: %w", p.Arguments, err)
	}
	r := &Run{IsError: res.IsError, Text: Text(res)}
	if res.StructuredContent == nil {
		return r, fmt.Errorf("run_go_code: no structured content; text: %s", clip.String(r.Text, 2000))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r.Out); err != nil {
		return r, fmt.Errorf("run_go_code: structured content %s: %w", clip.String(string(data), 2000), err)
	}
	return r, nil
}

// Tool calls any tool and returns its text and isError.
func Tool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", name, err)
	}
	return Text(res), res.IsError, nil
}

// Text joins a result's text content.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// expect returns an error describing r when ok is false.
func expect(ok bool, what string, r *Run) error {
	if ok {
		return nil
	}
	if r == nil {
		return errors.New(what)
	}
	return fmt.Errorf("%s; got isError=%v exit=%d outcome=%s timed_out=%v\nstdout: %s\nstderr: %s",
		what, r.IsError, r.Out.ExitCode, r.Out.Outcome, r.Out.TimedOut, clip.String(r.Out.Stdout, 2000), clip.String(r.Out.Stderr, 2000))
}

func session(ctx context.Context, t Target, opts *mcp.ClientOptions) (*mcp.ClientSession, func(), error) {
	cs, err := t.Connect(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the %s server: %w", t.Name, err)
	}
	return cs, func() { _ = cs.Close() }, nil
}

const goMod = "module example.com/smoke\n\ngo 1.24\n"

// HelloFiles returns the hello-world program the latency benchmark runs too.
func HelloFiles() map[string]string {
	return map[string]string{
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n",
	}
}
