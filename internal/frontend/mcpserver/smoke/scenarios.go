package smoke

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The scenarios Scenarios lists, one function each.

// goTimeout is the timeout_seconds of the scenarios' go commands: the
// scenarios check what the tools answer, not how fast the machine builds,
// and a go build without the seed build cache on a busy 2-CPU machine took
// past the default 60 s. It is the server's default --max-timeout.
const goTimeout = 600

func singleFile(ctx context.Context, t Target) error {
	cs, done, err := session(ctx, t, nil)
	if err != nil {
		return err
	}
	defer done()
	r, err := RunGo(ctx, cs, HelloFiles(), "go run main.go", goTimeout)
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
	r, err := RunGo(ctx, cs, files, "go build -o app . && ./app first", goTimeout)
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
	r, err := RunGo(ctx, cs, files, "go run .", goTimeout)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError && r.Out.Stdout == "hello, gopher\n", "go run . of a module with a sub-package", r); err != nil {
		return err
	}
	r, err = RunGo(ctx, cs, nil, "go test ./...", goTimeout)
	if err != nil {
		return err
	}
	if err := expect(!r.IsError && strings.Contains(r.Out.Stdout, "ok  \texample.com/smoke/internal/greet"), "go test ./... passes", r); err != nil {
		return err
	}
	// A failing test is reported as such.
	r, err = RunGo(ctx, cs, map[string]string{"internal/greet/fail_test.go": "package greet\n\nimport \"testing\"\n\nfunc TestFail(t *testing.T) { t.Fatal(\"boom\") }\n"}, "go test ./...", goTimeout)
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
	r, err := RunGo(ctx, cs, files, "go run main.go", goTimeout)
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
	r, err := RunGo(ctx, cs, spinFiles(), "go build -o spin .", goTimeout)
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
	r, err := RunGo(ctx, cs, spinFiles(), "go build -o spin .", goTimeout)
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
	r, err := RunGo(ctx, cs, files, "go build -o both main.go && ./both", goTimeout)
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
	r, err := RunGo(ctx, cs, files, "go run main.go", goTimeout)
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
	r, err := RunGo(ctx, cs, map[string]string{"go.mod": goMod, "pkg/a/a.go": "package a\n"}, "go build ./... && echo built > out.txt", goTimeout)
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
	r, err = RunGo(ctx, cs, HelloFiles(), "go run main.go", goTimeout)
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
