package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// instructions are sent to clients at initialization; many show them to
// the model.
const instructions = `This server runs Go code in an isolated Linux sandbox. Write files and run a command with run_go_code; files, built binaries and the Go build cache persist under /app across calls in this session, so iterate: write, run, read the errors, fix, rerun. read_file and list_files inspect /app; reset_sandbox empties it.`

const runDescription = `Build, run or test Go code in an isolated Linux sandbox and get back the exit code, stdout, stderr and timing.

files are written under /app (the working directory) before command runs. Paths are relative and may contain "/" (e.g. "go.mod", "internal/store/store.go"); a file with the same path is overwritten. Everything persists across calls in this session: files, built binaries and the Go build cache, so send only the files that changed and rerun binaries you built before.

command runs with /bin/sh -c in /app (pipes, && and ; work). Examples:
- one file: files {"main.go": "package main ..."}, command "go run main.go"
- a module with packages: files {"go.mod": "module example.com/app\n\ngo 1.24\n", "main.go": ..., "greet/greet.go": ...}, command "go run ."
- build once, run many times: "go build -o app . && ./app", then in a later call just "./app -n 3"
- tests: "go test ./..." or "go test -run TestParse -v ./parser"; a package holding only _test.go files needs go test, not go run
- checks: "go vet ./...", "gofmt -l ."

A command that fails still returns its full result, with isError true, the exit code and an outcome (build_failed, test_failed, panic, runtime_error, timeout, memory_limit, process_limit, file_size_limit, output_limit): read stderr, fix, call again. isError is true whenever outcome is not ok, also when a command that ran into a sandbox limit exited 0. Compile errors read file:line:col: message in stderr. Each command is killed after timeout_seconds (default %d, at most %d). Output is cut to its head and tail (a few KiB per stream) with a marker saying how much was left out; redirect large output to a file and read_file parts of it. Sandboxes usually have no network: prefer the standard library; modules resolve only from the module cache.`

// RunInput is run_go_code's input.
type RunInput struct {
	Files          map[string]string `json:"files,omitempty" jsonschema:"files to write under /app before the command runs: relative path (may contain /) to full content; existing files are overwritten"`
	Command        string            `json:"command" jsonschema:"shell command run with /bin/sh -c in /app, e.g. go run . or go test ./..."`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds; default 60"`
}

// RunOutput is run_go_code's structured result.
type RunOutput struct {
	ExitCode          int    `json:"exit_code" jsonschema:"exit status: 0 success, 124 killed by the timeout, 128+N killed by signal N"`
	Outcome           string `json:"outcome" jsonschema:"what the run came to"`
	Stdout            string `json:"stdout" jsonschema:"standard output, head and tail kept when long"`
	Stderr            string `json:"stderr" jsonschema:"standard error, head and tail kept when long"`
	DurationMS        int64  `json:"duration_ms" jsonschema:"wall time of the command in milliseconds"`
	TimedOut          bool   `json:"timed_out" jsonschema:"the command ran past timeout_seconds and was killed"`
	StdoutTruncated   bool   `json:"stdout_truncated" jsonschema:"stdout was cut"`
	StderrTruncated   bool   `json:"stderr_truncated" jsonschema:"stderr was cut"`
	StdoutElidedBytes int    `json:"stdout_elided_bytes" jsonschema:"bytes of stdout left out between head and tail"`
	StderrElidedBytes int    `json:"stderr_elided_bytes" jsonschema:"bytes of stderr left out between head and tail"`
	SandboxID         string `json:"sandbox_id" jsonschema:"the sandbox that ran the command"`
	NewSandbox        bool   `json:"new_sandbox,omitempty" jsonschema:"this call started a fresh sandbox because the earlier one was closed for being idle: files from earlier calls are gone"`
}

// outcomes lists every goruntime.Outcome for the output schema's enum.
var outcomes = []any{
	string(goruntime.OutcomeOK), string(goruntime.OutcomeBuildFailed), string(goruntime.OutcomeTestFailed),
	string(goruntime.OutcomePanic), string(goruntime.OutcomeRuntimeError), string(goruntime.OutcomeTimeout),
	string(goruntime.OutcomeMemoryLimit), string(goruntime.OutcomeProcessLimit),
	string(goruntime.OutcomeFileSizeLimit), string(goruntime.OutcomeOutputLimit),
}

// ReadInput is read_file's input.
type ReadInput struct {
	Path     string `json:"path" jsonschema:"file path relative to /app, e.g. main.go or out/log.txt"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"first byte to return, counted from 0; default 0"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"bytes to return from offset; default and at most 262144 (256 KiB)"`
}

// ReadOutput is read_file's structured result: bytes [offset, offset+length)
// of a file of size bytes.
type ReadOutput struct {
	Path      string `json:"path"`
	Content   string `json:"content" jsonschema:"the text of the range returned (empty for a binary file)"`
	Size      int64  `json:"size" jsonschema:"file size in bytes"`
	Offset    int64  `json:"offset" jsonschema:"first byte of the range returned"`
	Length    int    `json:"length" jsonschema:"bytes returned (content's length in bytes; 0 for a binary file)"`
	Truncated bool   `json:"truncated" jsonschema:"the file goes on after the range returned: call again with offset = offset + length"`
	Binary    bool   `json:"binary" jsonschema:"the range holds NUL bytes or is not UTF-8 text; content is empty"`
}

// ListInput is list_files's input.
type ListInput struct {
	Path      string `json:"path,omitempty" jsonschema:"directory relative to /app; default . (/app itself)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"also list subdirectories' contents"`
}

// ListEntry is one entry of list_files's result.
type ListEntry struct {
	Path  string `json:"path" jsonschema:"relative to /app"`
	IsDir bool   `json:"is_dir"`
	Size  int64  `json:"size" jsonschema:"bytes"`
}

// ListOutput is list_files's structured result.
type ListOutput struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated" jsonschema:"more entries exist than were listed"`
}

// ResetOutput is reset_sandbox's structured result.
type ResetOutput struct {
	Reset bool `json:"reset" jsonschema:"false when no sandbox had been started yet (nothing to reset)"`
}

const (
	maxReadBytes   = 256 << 10 // read_file returns at most this much of a file
	maxListEntries = 1000      // list_files stops after this many entries
)

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	runOut, err := jsonschema.For[RunOutput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of run_go_code: %v", err)) // a programming error in RunOutput
	}
	runOut.Properties["outcome"].Enum = outcomes
	runIn, err := jsonschema.For[RunInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of run_go_code: %v", err))
	}
	runIn.Properties["timeout_seconds"].Description = fmt.Sprintf(
		"kill the command after this many seconds; default %s, at most %s",
		secs(s.cfg.DefaultTimeout), secs(s.cfg.MaxTimeout))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "run_go_code",
		Title:        "Run Go code",
		Description:  fmt.Sprintf(runDescription, int(s.cfg.DefaultTimeout.Seconds()), int(s.cfg.MaxTimeout.Seconds())),
		InputSchema:  runIn,
		OutputSchema: runOut,
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run Go code",
			DestructiveHint: ptr(true), // overwrites files under /app
			OpenWorldHint:   ptr(false),
		},
	}, s.runGoCode)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "read_file",
		Title:       "Read a sandbox file",
		Description: fmt.Sprintf("Read a file from the sandbox's /app (files you wrote, program output redirected to a file, generated code). Returns at most %d KiB from offset (default 0) and the file's size; read a larger file in parts by passing offset (and max_bytes for smaller parts). A file holding NUL bytes or text that is not UTF-8 is reported as binary, not shown.", maxReadBytes>>10),
		Annotations: &mcp.ToolAnnotations{
			Title:          "Read a sandbox file",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  ptr(false),
		},
	}, s.readFile)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_files",
		Title:       "List sandbox files",
		Description: "List the files and directories under the sandbox's /app (or a subdirectory), with sizes; recursive lists the whole tree.",
		Annotations: &mcp.ToolAnnotations{
			Title:          "List sandbox files",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  ptr(false),
		},
	}, s.listFiles)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "reset_sandbox",
		Title:       "Reset the sandbox",
		Description: "Delete everything under /app to start over. The Go build and module caches stay, so the next build is still fast.",
		InputSchema: &jsonschema.Schema{Type: "object"},
		Annotations: &mcp.ToolAnnotations{
			Title:           "Reset the sandbox",
			DestructiveHint: ptr(true),
			IdempotentHint:  true,
			OpenWorldHint:   ptr(false),
		},
	}, s.resetSandbox)
}

func secs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }

// call runs fn holding the turn of the caller's MCP session, with the
// session's sandbox opened. announce, when non-nil, is told before a
// sandbox is opened.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, open bool, announce func(string),
	fn func(sess *goruntime.Session, fresh time.Duration) error) error {
	key := stdioKey
	var watch func() <-chan struct{}
	if ss := req.Session; ss != nil && ss.ID() != "" {
		key = ss.ID()
		watch = func() <-chan struct{} {
			done := make(chan struct{})
			go func() {
				_ = ss.Wait()
				close(done)
			}()
			return done
		}
	}
	var stopForward func()
	if announce != nil {
		// A call waiting behind an open (the one at startup, another
		// call's) tells its client how far that open is.
		stopForward = forwardOpening(func() string { return s.pool.openingMessage(key) }, announce)
	}
	sl, err := s.pool.acquire(ctx, key, watch)
	if stopForward != nil {
		stopForward()
	}
	if err != nil {
		return err
	}
	defer s.pool.release(sl)
	if sl.sess == nil && !open {
		return fn(nil, 0)
	}
	if sl.sess == nil && announce != nil {
		announce("starting a " + s.cfg.Backend.Name() + " sandbox")
		ctx = goruntime.WithProgress(ctx, func(p goruntime.Progress) { announce(p.String()) })
	}
	sess, err := s.pool.session(ctx, sl)
	if err != nil {
		return err
	}
	reaped := sl.reaped
	sl.reaped = 0
	err = fn(sess, reaped)
	if errors.Is(err, goruntime.ErrSandboxGone) {
		// Forget the dead sandbox so the session's next call opens a new one.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		s.pool.closeSession(cctx, sl, "sandbox gone")
		cancel()
	}
	return err
}

func (s *Server) runGoCode(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, RunOutput{}, errors.New(`command is required: a shell command such as "go run ." (to only write files, use "true")`)
	}
	timeout := s.cfg.DefaultTimeout
	if in.TimeoutSeconds != 0 {
		if in.TimeoutSeconds < 0 || math.IsNaN(in.TimeoutSeconds) || math.IsInf(in.TimeoutSeconds, 0) {
			return nil, RunOutput{}, fmt.Errorf("timeout_seconds %v: must be a positive number of seconds", in.TimeoutSeconds)
		}
		if in.TimeoutSeconds > s.cfg.MaxTimeout.Seconds() {
			return nil, RunOutput{}, fmt.Errorf("timeout_seconds %v: at most %s is allowed", in.TimeoutSeconds, secs(s.cfg.MaxTimeout))
		}
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	files := make([]goruntime.File, 0, len(in.Files))
	for p, c := range in.Files {
		files = append(files, goruntime.File{Path: p, Data: []byte(c)})
	}
	slices.SortFunc(files, func(a, b goruntime.File) int { return strings.Compare(a.Path, b.Path) })
	if err := goruntime.ValidateFiles(files); err != nil {
		return nil, RunOutput{}, fmt.Errorf("files: %w", err)
	}

	prog := s.startProgress(ctx, req, timeout)
	defer prog.stop()

	var (
		res    *goruntime.Result
		sbID   string
		reaped time.Duration
	)
	err := s.call(ctx, req, true, prog.say, func(sess *goruntime.Session, r time.Duration) error {
		reaped, sbID = r, sess.ID()
		if s.cfg.Ephemeral {
			if err := sess.Reset(ctx); err != nil {
				return fmt.Errorf("empty /app before the call (--ephemeral): %w", err)
			}
		}
		prog.say("running " + clip.String(in.Command, 80))
		req := goruntime.Request{Files: files, Command: in.Command, Timeout: timeout}
		var err error
		if prog.active() {
			res, err = sess.ExecuteStream(ctx, req, prog.chunk)
		} else {
			// Nobody listens for progress: skip streaming, which costs a
			// connection per call on some backends.
			res, err = sess.Execute(ctx, req)
		}
		return err
	})
	if err != nil {
		s.log.Warn("run_go_code failed", "command", clip.String(in.Command, 120), "err", err)
		return nil, RunOutput{}, describe(err)
	}
	out := RunOutput{
		ExitCode:          res.ExitCode,
		Outcome:           string(res.Outcome),
		Stdout:            res.Stdout,
		Stderr:            res.Stderr,
		DurationMS:        res.Duration.Milliseconds(),
		TimedOut:          res.Outcome == goruntime.OutcomeTimeout,
		StdoutTruncated:   res.StdoutTruncated,
		StderrTruncated:   res.StderrTruncated,
		StdoutElidedBytes: res.StdoutElided,
		StderrElidedBytes: res.StderrElided,
		SandboxID:         sbID,
		NewSandbox:        reaped > 0,
	}
	text := formatRun(out, timeout, reaped)
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		// Any outcome but ok is a failed run, also one that exited 0 after
		// running into a sandbox limit (its output or files are cut short).
		IsError: res.Outcome != goruntime.OutcomeOK || res.ExitCode != 0,
	}, out, nil
}

// formatRun renders a run for a model to read: a status line, then each
// stream under a header.
func formatRun(o RunOutput, timeout, reaped time.Duration) string {
	var b strings.Builder
	if reaped > 0 {
		fmt.Fprintf(&b, "note: this session's earlier sandbox was closed after %s idle; this call ran in a fresh one and files from earlier calls are gone\n",
			reaped.Round(time.Second))
	}
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "timeout: killed after %s (exit code %d, %d ms); raise timeout_seconds or look for a hang\n",
			secs(timeout), o.ExitCode, o.DurationMS)
	default:
		fmt.Fprintf(&b, "exit code %d (%s) in %d ms\n", o.ExitCode, o.Outcome, o.DurationMS)
	}
	writeStream(&b, "stdout", o.Stdout, o.StdoutTruncated, o.StdoutElidedBytes)
	writeStream(&b, "stderr", o.Stderr, o.StderrTruncated, o.StderrElidedBytes)
	return strings.TrimRight(b.String(), "\n")
}

func writeStream(b *strings.Builder, name, s string, truncated bool, elided int) {
	switch {
	case s == "" && !truncated:
		fmt.Fprintf(b, "--- %s: (empty)\n", name)
		return
	case elided > 0:
		fmt.Fprintf(b, "--- %s (truncated: %d bytes left out in the middle) ---\n", name, elided)
	case truncated:
		fmt.Fprintf(b, "--- %s (truncated: the sandbox cut it at its output limit) ---\n", name)
	default:
		fmt.Fprintf(b, "--- %s ---\n", name)
	}
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}

// describe turns a library error into one a model can act on.
func describe(err error) error {
	switch {
	case errors.Is(err, goruntime.ErrPathEscape):
		return fmt.Errorf("%w; use paths relative to /app such as main.go or pkg/util.go", err)
	case errors.Is(err, goruntime.ErrSandboxGone):
		return fmt.Errorf("%w; the next call starts a new, empty sandbox (files from earlier calls are lost)", err)
	case errors.Is(err, goruntime.ErrUnavailable):
		return fmt.Errorf("the sandbox backend is unavailable: %w", err)
	case errors.Is(err, errTooManySandboxes):
		return err
	}
	return err
}

func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	p, err := cleanPath(in.Path, false)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	limit := in.MaxBytes
	switch {
	case limit == 0:
		limit = maxReadBytes
	case limit < 0 || limit > maxReadBytes:
		return nil, ReadOutput{}, fmt.Errorf("max_bytes %d: must be between 1 and %d (256 KiB); read a larger file in parts with offset", limit, maxReadBytes)
	}
	if in.Offset < 0 {
		return nil, ReadOutput{}, fmt.Errorf("offset %d: must be 0 or more", in.Offset)
	}
	var (
		data []byte
		size int64
	)
	err = s.call(ctx, req, true, nil, func(sess *goruntime.Session, _ time.Duration) error {
		var err error
		data, size, err = readRange(ctx, sess, p, in.Offset, limit)
		return err
	})
	if err != nil {
		return nil, ReadOutput{}, describe(err)
	}
	out := ReadOutput{Path: p, Size: size, Offset: in.Offset}
	// A range may start or end inside a UTF-8 sequence: drop the pieces.
	for i := 0; i < utf8.UTFMax-1 && in.Offset > 0 && len(data) > 0 && !utf8.RuneStart(data[0]); i++ {
		data = data[1:]
		out.Offset++
	}
	if out.Offset+int64(len(data)) < size {
		data = trimPartialRune(data)
	}
	end := out.Offset + int64(len(data))
	out.Truncated = end < size
	var text string
	switch {
	case bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data):
		out.Binary = true
		text = fmt.Sprintf("%s is a binary file (%d bytes; bytes %d-%d hold NUL bytes or are not UTF-8 text); its content is not shown. Inspect it with run_go_code, e.g. command \"od -A d -c %s | head -50\"",
			p, size, out.Offset, end, shell.Quote(p))
	default:
		out.Content = string(data)
		out.Length = len(data)
		text = out.Content
		if out.Offset > 0 || out.Truncated {
			text += fmt.Sprintf("\n[... %s is %d bytes; this is bytes %d-%d", p, size, out.Offset, end)
			if out.Truncated {
				text += fmt.Sprintf("; read on with offset %d", end)
			}
			text += " ...]"
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// readRange returns at most n bytes of file p from offset off, and the
// file's size, without holding more than about n bytes in memory: it lists
// p's directory to learn the size and type, downloads a file that fits
// whole, and reads a range of a larger one with head and tail inside the
// sandbox. Errors name p and say what to do.
func readRange(ctx context.Context, sess *goruntime.Session, p string, off int64, n int) ([]byte, int64, error) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	infos, err := sess.List(ctx, dir)
	switch {
	case errors.Is(err, goruntime.ErrNotExist):
		return nil, 0, fmt.Errorf("read %s: no such file under /app (list_files shows what is there)", p)
	case err != nil:
		return nil, 0, err // the library names the operation and the path
	}
	i := slices.IndexFunc(infos, func(fi goruntime.FileInfo) bool { return fi.Name == base })
	switch {
	case i < 0:
		return nil, 0, fmt.Errorf("read %s: no such file under /app (list_files shows what is there)", p)
	case infos[i].IsDir:
		return nil, 0, fmt.Errorf("read %s: it is a directory; use list_files with path %q to see what it holds", p, p)
	}
	size := infos[i].Size
	if off > size {
		return nil, 0, fmt.Errorf("read %s: offset %d is past the end of the file (%d bytes)", p, off, size)
	}
	if off == 0 && size <= int64(n) {
		data, err := sess.ReadFile(ctx, p)
		switch {
		case errors.Is(err, goruntime.ErrNotExist):
			// Listed but not readable: removed since, or not a regular
			// file (a named pipe, a dangling symlink); the error says which.
			return nil, 0, fmt.Errorf("%w; list_files shows what is there", err)
		case err != nil:
			return nil, 0, err
		}
		size = max(size, int64(len(data))) // it may have grown since the listing
		return data[:min(len(data), n)], size, nil
	}
	want := min(int64(n), size-off)
	if want == 0 {
		return nil, size, nil
	}
	// tail seeks to the offset of a regular file; head stops after want
	// bytes; base64 keeps every byte through the JSON of the runtime
	// contract, which replaces bytes that are not UTF-8.
	cmd := fmt.Sprintf("tail -c +%d -- %s | head -c %d | base64", off+1, shell.Quote(p), want)
	res, err := sess.Sandbox().Exec(ctx, goruntime.ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil {
		return nil, 0, fmt.Errorf("read bytes %d-%d of %s: %w", off, off+want, p, err)
	}
	if res.ExitCode != 0 || res.StdoutTruncated {
		return nil, 0, fmt.Errorf("read bytes %d-%d of %s: exit code %d: %s", off, off+want, p, res.ExitCode, clip.String(strings.TrimSpace(res.Stderr), 500))
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(res.Stdout), ""))
	if err != nil {
		return nil, 0, fmt.Errorf("read bytes %d-%d of %s: decode the sandbox's base64: %w", off, off+want, p, err)
	}
	return data[:min(len(data), int(want))], size, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (left
// by cutting a longer text).
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// cleanPath checks a path given to read_file or list_files: relative to
// /app, no "..". dirOK allows "." (the work directory itself). Leading
// "/app/" is accepted, since models often write it.
func cleanPath(p string, dirOK bool) (string, error) {
	orig := p
	if p == "/app" || strings.HasPrefix(p, "/app/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/app"), "/")
	}
	if p == "" {
		if dirOK {
			return ".", nil
		}
		return "", errors.New("path is required: a file under /app such as main.go")
	}
	if err := goruntime.CheckPath(p); err != nil {
		if strings.HasPrefix(p, "/") {
			return "", fmt.Errorf("%w; use a path relative to /app", err)
		}
		return "", err
	}
	p = path.Clean(p)
	if p == "." && !dirOK {
		return "", fmt.Errorf("path %q names the /app directory, not a file; use list_files", orig)
	}
	return p, nil
}

func (s *Server) listFiles(ctx context.Context, req *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	root, err := cleanPath(in.Path, true)
	if err != nil {
		return nil, ListOutput{}, err
	}
	out := ListOutput{Path: root, Entries: []ListEntry{}}
	err = s.call(ctx, req, true, nil, func(sess *goruntime.Session, _ time.Duration) error {
		queue := []string{root}
		for len(queue) > 0 && !out.Truncated {
			dir := queue[0]
			queue = queue[1:]
			infos, err := sess.List(ctx, dir)
			if err != nil {
				if dir != root && errors.Is(err, goruntime.ErrNotExist) {
					continue // removed while we walked
				}
				return err
			}
			slices.SortFunc(infos, func(a, b goruntime.FileInfo) int { return strings.Compare(a.Name, b.Name) })
			for _, fi := range infos {
				if len(out.Entries) == maxListEntries {
					out.Truncated = true
					break
				}
				p := fi.Name
				if dir != "." {
					p = dir + "/" + fi.Name
				}
				out.Entries = append(out.Entries, ListEntry{Path: p, IsDir: fi.IsDir, Size: fi.Size})
				if fi.IsDir && in.Recursive {
					queue = append(queue, p)
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, goruntime.ErrNotExist):
		return nil, ListOutput{}, fmt.Errorf("list %s: no such directory under /app", root)
	case err != nil:
		return nil, ListOutput{}, describe(err) // the library names the operation and the path
	}
	if in.Recursive {
		slices.SortFunc(out.Entries, func(a, b ListEntry) int { return strings.Compare(a.Path, b.Path) })
	}
	var b strings.Builder
	if len(out.Entries) == 0 {
		fmt.Fprintf(&b, "/app/%s is empty", strings.TrimPrefix(root, "."))
	}
	for _, e := range out.Entries {
		if e.IsDir {
			fmt.Fprintf(&b, "%s/\n", e.Path)
		} else {
			fmt.Fprintf(&b, "%s  %d bytes\n", e.Path, e.Size)
		}
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[... stopped after %d entries ...]", maxListEntries)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, out, nil
}

func (s *Server) resetSandbox(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ResetOutput, error) {
	var out ResetOutput
	err := s.call(ctx, req, false, nil, func(sess *goruntime.Session, _ time.Duration) error {
		if sess == nil {
			return nil
		}
		out.Reset = true
		return sess.Reset(ctx)
	})
	if err != nil {
		return nil, ResetOutput{}, describe(err)
	}
	text := "/app is empty now; the Go build and module caches were kept"
	if !out.Reset {
		text = "no sandbox started yet: nothing to reset"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// forwardOpening passes message() to announce every openingPoll until the
// returned stop is called, whenever it is not empty.
func forwardOpening(message func() string, announce func(string)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(openingPoll)
		defer t.Stop()
		for {
			if m := message(); m != "" {
				announce(m)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// openingPoll is how often a call waiting behind an open picks up its
// progress.
const openingPoll = 250 * time.Millisecond

// progress sends notifications/progress for one run_go_code call while its
// command runs, when the client gave a progress token: every
// Config.ProgressInterval, with the elapsed seconds as progress, the
// timeout as total and the latest output line as message.
type progress struct {
	on      bool // the client asked for progress
	mu      sync.Mutex
	message string
	stopped chan struct{}
	done    sync.WaitGroup
}

func (s *Server) startProgress(ctx context.Context, req *mcp.CallToolRequest, timeout time.Duration) *progress {
	p := &progress{stopped: make(chan struct{})}
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	if token == nil || req.Session == nil {
		return p
	}
	p.on = true
	start := time.Now()
	send := func() {
		p.mu.Lock()
		msg := p.message
		p.mu.Unlock()
		elapsed := time.Since(start).Seconds()
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      math.Round(elapsed*10) / 10,
			Total:         timeout.Seconds(),
			Message:       msg,
		})
		if err != nil {
			s.log.Debug("progress notification", "err", err)
		}
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stopped:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				send()
			}
		}
	}()
	return p
}

// active reports whether notifications are being sent.
func (p *progress) active() bool { return p.on }

// say sets the message of the next notification.
func (p *progress) say(msg string) {
	p.mu.Lock()
	p.message = msg
	p.mu.Unlock()
}

// chunk notes the last non-empty line of output as the next message.
func (p *progress) chunk(c goruntime.Chunk) {
	text := strings.TrimRight(string(c.Data), "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	if text = strings.TrimSpace(text); text == "" {
		return
	}
	p.say(string(c.Stream) + ": " + clip.String(text, 200))
}

func (p *progress) stop() {
	close(p.stopped)
	p.done.Wait()
}
