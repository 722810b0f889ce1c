package mcpserver

import (
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// instructions are sent to clients at initialization; many show them to
// the model.
const instructions = `This server runs Go code in an isolated Linux sandbox. Write files and run a command with run_go_code; files, built binaries and the Go build cache persist under /app across calls in this session, so iterate: write, run, read the errors, fix, rerun. read_file and list_files inspect /app; reset_sandbox empties it. For a workspace that outlives this connection, create_sandbox returns a sandbox_id: pass it to every tool to work there (list_sandboxes, delete_sandbox manage yours; each ends after its idle TTL).`

const runDescription = `Build, run or test Go code in an isolated Linux sandbox and get back the exit code, stdout, stderr and timing.

files are written under /app (the working directory) before command runs. Paths are relative and may contain "/" (e.g. "go.mod", "internal/store/store.go"); a file with the same path is overwritten. Everything persists across calls in this session: files, built binaries and the Go build cache, so send only the files that changed and rerun binaries you built before.

command runs with /bin/sh -c in /app (pipes, && and ; work). Examples:
- one file: files {"main.go": "package main ..."}, command "go run main.go"
- a module with packages: files {"go.mod": "module example.com/app\n\ngo 1.24\n", "main.go": ..., "greet/greet.go": ...}, command "go run ."
- build once, run many times: "go build -o app . && ./app", then in a later call just "./app -n 3"
- tests: "go test ./..." or "go test -run TestParse -v ./parser"; a package holding only _test.go files needs go test, not go run
- checks: "go vet ./...", "gofmt -l ." (or the check_go_code tool)
- another Go release: go_version "1.25.9"

A command that fails still returns its full result, with isError true, the exit code and an outcome (build_failed, test_failed, panic, runtime_error, timeout, memory_limit, process_limit, file_size_limit, disk_limit, output_limit): read stderr, fix, call again. isError is true whenever outcome is not ok, also when a command that ran into a sandbox limit exited 0. Compile errors read file:line:col: message in stderr; the result also lists them as diagnostics (file, line, column, message, source: compile, vet, gofmt, test), and a go test run lists its tests (package, name, status: pass, fail, skip, elapsed_ms, output). Each command is killed after timeout_seconds (default %d, at most %d). Output is cut to its head and tail (a few KiB per stream) with a marker saying how much was left out; redirect large output to a file and read_file parts of it. Sandboxes usually have no network: prefer the standard library; modules resolve only from the module cache and the module patterns the server allows (--allow-modules; a refusal names the pattern to add).`

// RunInput is run_go_code's input.
type RunInput struct {
	Files          map[string]string `json:"files,omitempty" jsonschema:"files to write under /app before the command runs: relative path (may contain /) to full content; existing files are overwritten"`
	Command        string            `json:"command" jsonschema:"shell command run with /bin/sh -c in /app, e.g. go run . or go test ./..."`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds; default 60"`
	GoVersion      string            `json:"go_version,omitempty" jsonschema:"Go release the command's go runs, e.g. 1.25.9; default the sandbox's own. An unavailable version is an error listing the available ones"`
	SandboxID      string            `json:"sandbox_id,omitempty" jsonschema:"work in this sandbox of yours (from create_sandbox); default: this session's own sandbox"`
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
	// Go-aware results (goaware.go), always present, possibly empty.
	Diagnostics     []Diagnostic `json:"diagnostics" jsonschema:"compile, vet, gofmt and test findings the go tool printed, with file (relative to /app), line and column"`
	DiagnosticsLeft int          `json:"diagnostics_left_out,omitempty" jsonschema:"findings beyond the ones listed"`
	Tests           []TestResult `json:"tests" jsonschema:"per-test results of a go test command (every test with -v or -json; only the failures of a plain go test, which prints nothing for passing tests)"`
	TestsLeft       int          `json:"tests_left_out,omitempty" jsonschema:"tests beyond the ones listed (failures are listed first)"`
}

// outcomes lists every goruntime.Outcome for the output schema's enum.
var outcomes = []any{
	string(goruntime.OutcomeOK), string(goruntime.OutcomeBuildFailed), string(goruntime.OutcomeTestFailed),
	string(goruntime.OutcomePanic), string(goruntime.OutcomeRuntimeError), string(goruntime.OutcomeTimeout),
	string(goruntime.OutcomeMemoryLimit), string(goruntime.OutcomeProcessLimit),
	string(goruntime.OutcomeFileSizeLimit), string(goruntime.OutcomeDiskLimit), string(goruntime.OutcomeOutputLimit),
}

// ReadInput is read_file's input.
type ReadInput struct {
	Path      string `json:"path" jsonschema:"file path relative to /app, e.g. main.go or out/log.txt"`
	Offset    int64  `json:"offset,omitempty" jsonschema:"first byte to return, counted from 0; default 0"`
	MaxBytes  int    `json:"max_bytes,omitempty"` // described in addTools, from maxReadBytes
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"work in this sandbox of yours (from create_sandbox); default: this session's own sandbox"`
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
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox the call used (empty: none)"`
}

// ListInput is list_files's input.
type ListInput struct {
	Path      string `json:"path,omitempty" jsonschema:"directory relative to /app; default . (/app itself)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"also list subdirectories' contents"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"work in this sandbox of yours (from create_sandbox); default: this session's own sandbox"`
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
	SandboxID string      `json:"sandbox_id" jsonschema:"the sandbox the call used (empty: none)"`
}

// ResetOutput is reset_sandbox's structured result.
type ResetOutput struct {
	Reset     bool   `json:"reset" jsonschema:"false when no sandbox had been started yet (nothing to reset)"`
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox the call used (empty: none)"`
}

// ResetInput is reset_sandbox's input.
type ResetInput struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"work in this sandbox of yours (from create_sandbox); default: this session's own sandbox"`
}

func ptr[T any](v T) *T { return &v }
