package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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

func singleFile(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	r, err := RunGo(ctx, cs, HelloFiles(), "go run main.go", 0)
	if err != nil {
		return err
	}
	return expect(!r.IsError && r.Out.ExitCode == 0 && r.Out.Outcome == "ok" && r.Out.Stdout == "hello, world\n" &&
		strings.Contains(r.Text, "hello, world") && strings.Contains(r.Text, "exit code 0"),
		"want hello, world with exit 0", r)
}

func buildThenRerun(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	files := map[string]string{
		"go.mod": goMod,
		"main.go": `package main

import (
	"fmt"
	"os"
	"strings"
)

func main() { fmt.Println("args:", strings.Join(os.Args[1:], ",")) }
`,
	}
	r, err := RunGo(ctx, cs, files, "go build -o app . && ./app first", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError && r.Out.Stdout == "args: first\n", "build and run", r); err != nil {
		return err
	}
	r, err = RunGo(ctx, cs, nil, "./app second third", 0)
	if err != nil {
		return err
	}
	return expect(!r.IsError && r.Out.Stdout == "args: second,third\n", "rerun the binary built by the previous call", r)
}

func moduleWithSubpackage(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	files := map[string]string{
		"go.mod": goMod,
		"main.go": `package main

import (
	"fmt"

	"example.com/smoke/internal/greet"
)

func main() { fmt.Println(greet.Hello("gopher")) }
`,
		"internal/greet/greet.go": "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"hello, \" + name }\n",
		"internal/greet/greet_test.go": `package greet

import "testing"

func TestHello(t *testing.T) {
	if got := Hello("x"); got != "hello, x" {
		t.Fatalf("Hello(x) = %q", got)
	}
}
`,
	}
	r, err := RunGo(ctx, cs, files, "go run .", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError && r.Out.Stdout == "hello, gopher\n", "go run . of a module with a sub-package", r); err != nil {
		return err
	}
	r, err = RunGo(ctx, cs, nil, "go test ./...", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError && strings.Contains(r.Out.Stdout, "ok  \texample.com/smoke/internal/greet"), "go test ./... passes", r); err != nil {
		return err
	}
	// A failing test is reported as such.
	r, err = RunGo(ctx, cs, map[string]string{"internal/greet/fail_test.go": "package greet\n\nimport \"testing\"\n\nfunc TestFail(t *testing.T) { t.Fatal(\"boom\") }\n"}, "go test ./...", 0)
	if err != nil {
		return err
	}
	return expect(r.IsError && r.Out.Outcome == "test_failed" && strings.Contains(r.Out.Stdout, "--- FAIL: TestFail"), "a failing test gives test_failed", r)
}

func compileError(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	files := map[string]string{"main.go": "package main\n\nfunc main() {\n\tfmt.Println(undefinedName)\n}\n"}
	r, err := RunGo(ctx, cs, files, "go run main.go", 0)
	if err != nil {
		return err
	}
	return expect(r.IsError && r.Out.ExitCode != 0 && r.Out.Outcome == "build_failed" &&
		strings.Contains(r.Out.Stderr, "main.go:4:") && strings.Contains(r.Text, "main.go:4:"),
		"want isError, build_failed and main.go:4: in stderr", r)
}

// spinFiles returns a program that prints, then writes "finished" after
// two seconds, then sleeps until killed.
func spinFiles() map[string]string {
	return map[string]string{
		"go.mod": goMod,
		"main.go": `package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Println("started")
	time.Sleep(2 * time.Second)
	os.WriteFile("finished", []byte("yes"), 0o644)
	for {
		time.Sleep(time.Second)
	}
}
`,
	}
}

func timeout(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	r, err := RunGo(ctx, cs, spinFiles(), "go build -o spin .", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError, "build the spinner", r); err != nil {
		return err
	}
	start := time.Now()
	r, err = RunGo(ctx, cs, nil, "./spin", 3)
	if err != nil {
		return err
	}
	if d := time.Since(start); d > 30*time.Second {
		return fmt.Errorf("a 3 s timeout took %s to come back", d)
	}
	return expect(r.IsError && r.Out.TimedOut && r.Out.Outcome == "timeout" && r.Out.Stdout == "started\n" &&
		strings.Contains(r.Text, "timeout: killed after 3s"),
		"want a reported timeout with the output so far", r)
}

func cancellation(ctx context.Context, t Target) error {
	progress := make(chan struct{}, 100)
	cs, done, err := session(ctx, t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if strings.Contains(r.Params.Message, "./spin") || strings.Contains(r.Params.Message, "started") {
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		return err
	}
	defer done()
	r, err := RunGo(ctx, cs, spinFiles(), "go build -o spin .", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError, "build the spinner", r); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"command": "./spin", "timeout_seconds": 60}}
	p.SetProgressToken("cancel-me")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, p)
		errc <- err
	}()
	select {
	case <-progress:
	case <-time.After(30 * time.Second):
		return errors.New("no progress notification while ./spin ran")
	}
	time.Sleep(300 * time.Millisecond) // let the program print and start sleeping
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			return errors.New("cancelled call returned a result")
		}
	case <-time.After(10 * time.Second):
		return errors.New("cancelled call did not return within 10 s")
	}
	// The session is free at once, and the killed program never got to
	// write its file.
	start := time.Now()
	r, err = RunGo(ctx, cs, nil, "sleep 3; ls", 0)
	if err != nil {
		return err
	}
	if d := time.Since(start); d > 20*time.Second {
		return fmt.Errorf("the call after a cancellation took %s", d)
	}
	return expect(!r.IsError && strings.Contains(r.Out.Stdout, "spin") && !strings.Contains(r.Out.Stdout, "finished"),
		"the cancelled program kept running (it wrote ./finished)", r)
}

func bothStreams(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	files := map[string]string{"main.go": `package main

import (
	"fmt"
	"os"
)

func main() {
	for i := range 3 {
		fmt.Printf("out %d\n", i)
		fmt.Fprintf(os.Stderr, "err %d\n", i)
	}
	os.Exit(2)
}
`}
	r, err := RunGo(ctx, cs, files, "go build -o both main.go && ./both", 0)
	if err != nil {
		return err
	}
	if err := expect(r.IsError && r.Out.ExitCode == 2 && r.Out.Outcome == "runtime_error" &&
		r.Out.Stdout == "out 0\nout 1\nout 2\n" && r.Out.Stderr == "err 0\nerr 1\nerr 2\n",
		"want both streams kept apart and exit code 2", r); err != nil {
		return err
	}
	r, err = RunGo(ctx, cs, nil, "echo second", 0)
	if err != nil {
		return err
	}
	return expect(!r.IsError && r.Out.Stdout == "second\n" && r.Out.Stderr == "", "the second call sees only its own output", r)
}

func hugeOutput(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	files := map[string]string{"main.go": `package main

import (
	"bufio"
	"os"
	"strings"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	line := strings.Repeat("x", 99) + "\n"
	for range 100_000 {
		w.WriteString(line)
	}
	w.WriteString("END\n")
	w.Flush()
}
`}
	r, err := RunGo(ctx, cs, files, "go run main.go", 0)
	if err != nil {
		return err
	}
	// The program exits 0; when the sandbox cut its output (outcome
	// output_limit) the call is an error, else it is not.
	return expect(r.Out.ExitCode == 0 && r.IsError == (r.Out.Outcome != "ok") && r.Out.StdoutTruncated && r.Out.StdoutElidedBytes > 1_000_000 &&
		len(r.Text) < 64<<10 && len(r.Out.Stdout) < 64<<10 && strings.Contains(r.Text, "truncated"),
		fmt.Sprintf("10 MB of output must come back capped (text %d bytes)", len(r.Text)), r)
}

func readListReset(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	r, err := RunGo(ctx, cs, map[string]string{"go.mod": goMod, "pkg/a/a.go": "package a\n"}, "go build ./... && echo built > out.txt", 0)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError, "build", r); err != nil {
		return err
	}
	txt, isErr, err := Tool(ctx, cs, "read_file", map[string]any{"path": "out.txt"})
	if err != nil || isErr || txt != "built\n" {
		return fmt.Errorf("read_file out.txt: %q isError=%v err=%v", txt, isErr, err)
	}
	txt, isErr, err = Tool(ctx, cs, "list_files", map[string]any{"recursive": true})
	if err != nil || isErr || !strings.Contains(txt, "pkg/a/a.go") || !strings.Contains(txt, "go.mod") {
		return fmt.Errorf("list_files: %q isError=%v err=%v", txt, isErr, err)
	}
	if txt, isErr, err = Tool(ctx, cs, "reset_sandbox", nil); err != nil || isErr {
		return fmt.Errorf("reset_sandbox: %q isError=%v err=%v", txt, isErr, err)
	}
	txt, isErr, err = Tool(ctx, cs, "list_files", nil)
	if err != nil || isErr || !strings.Contains(txt, "empty") {
		return fmt.Errorf("list_files after reset: %q isError=%v err=%v", txt, isErr, err)
	}
	// The build cache survived: rebuilding the same package still works.
	r, err = RunGo(ctx, cs, HelloFiles(), "go run main.go", 0)
	if err != nil {
		return err
	}
	return expect(!r.IsError && r.Out.Stdout == "hello, world\n", "run after reset", r)
}

func sessionsIsolated(ctx context.Context, t Target) error {
	a, doneA, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer doneA()
	b, doneB, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer doneB()
	var (
		wg     sync.WaitGroup
		ra, rb *Run
		ea, eb error
	)
	wg.Go(func() { ra, ea = RunGo(ctx, a, map[string]string{"secret-a.txt": "a"}, "ls", 0) })
	wg.Go(func() { rb, eb = RunGo(ctx, b, map[string]string{"secret-b.txt": "b"}, "ls", 0) })
	wg.Wait()
	if err := errors.Join(ea, eb); err != nil {
		return err
	}
	if err := expect(ra.Out.Stdout == "secret-a.txt\n", "session a sees only its file", ra); err != nil {
		return err
	}
	if err := expect(rb.Out.Stdout == "secret-b.txt\n", "session b sees only its file", rb); err != nil {
		return err
	}
	if ra.Out.SandboxID == rb.Out.SandboxID {
		return fmt.Errorf("both sessions ran in sandbox %s", ra.Out.SandboxID)
	}
	txt, isErr, err := Tool(ctx, b, "read_file", map[string]any{"path": "secret-a.txt"})
	if err != nil || !isErr {
		return fmt.Errorf("session b read session a's file: %q err=%v", txt, err)
	}
	r, err := RunGo(ctx, b, nil, "cat secret-a.txt", 0)
	if err != nil {
		return err
	}
	return expect(r.IsError, "session b must not find session a's file", r)
}
