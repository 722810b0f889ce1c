package goruntime

import (
	"regexp"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// Outcome classifies what a command's run came to.
type Outcome string

const (
	// OutcomeOK: exit code 0.
	OutcomeOK Outcome = "ok"
	// OutcomeBuildFailed: the go tool could not build (compile errors,
	// missing modules, bad go.mod).
	OutcomeBuildFailed Outcome = "build_failed"
	// OutcomeTestFailed: go test ran and a test failed.
	OutcomeTestFailed Outcome = "test_failed"
	// OutcomePanic: a Go program panicked or hit a fatal runtime error
	// (deadlock, concurrent map writes).
	OutcomePanic Outcome = "panic"
	// OutcomeRuntimeError: any other non-zero exit.
	OutcomeRuntimeError Outcome = "runtime_error"
	// OutcomeTimeout: the deadline killed the command.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeMemoryLimit: killed for exceeding the sandbox's memory limit.
	OutcomeMemoryLimit Outcome = "memory_limit"
	// OutcomeProcessLimit: the sandbox's process limit stopped the command.
	OutcomeProcessLimit Outcome = "process_limit"
	// OutcomeFileSizeLimit: a write exceeded the sandbox's file size limit.
	OutcomeFileSizeLimit Outcome = "file_size_limit"
	// OutcomeDiskLimit: the sandbox's disk quota (bytes or inodes) ran
	// out: a write or file creation failed with "no space left on
	// device".
	OutcomeDiskLimit Outcome = "disk_limit"
	// OutcomeOutputLimit: the command's output exceeded the server's cap
	// and was cut (whatever the exit code).
	OutcomeOutputLimit Outcome = "output_limit"
)

var (
	// file.go:12:3: message, as gc and vet print it. The column is required:
	// a program logging with log.Lshortfile prints "main.go:12: message".
	compileErrRE = regexp.MustCompile(`(?m)^\s*[^\s:]+\.go:\d+:\d+: `)
	// file.go:12: message, without the column: what the go command prints
	// for a syntax error under a //line directive (GOROOT/test's
	// fixedbugs/issue18393.go), with no "# pkg" header. A build failure
	// only when the command runs no program of its own (soleGoCommand).
	compileErrNoColRE = regexp.MustCompile(`(?m)^\s*[^\s:]+\.go:\d+: `)
	// The last line go run prints when the program it built exits non-zero:
	// the build succeeded, so the output before it is the program's own.
	goRunExitRE = regexp.MustCompile(`(?m)^exit status \d+\n?\z`)
	// --- FAIL: TestX, or a FAIL line from go test's package summary, or
	// a fail event of go test -json.
	testFailRE = regexp.MustCompile(`(?m)^(--- FAIL: |FAIL\s|FAIL$)|"Action":"fail"`)
	// panic: ..., fatal error: ... at the start of a line.
	panicRE = regexp.MustCompile(`(?m)^(panic: |fatal error: )`)
	// go: errors before building (module resolution, go.mod).
	goToolErrRE = regexp.MustCompile(`(?m)^go: (.*(cannot find|no required module|missing go.sum|no Go files|not in std|cannot find main module|go.mod|module lookup disabled|malformed|is not in GOROOT|errors parsing))`)
)

// Classify derives an Outcome from a command and its result.
func Classify(command string, r *ExecResult) Outcome {
	// A resource limit the command ran into explains a timeout that
	// followed it (a fork bomb runs until the deadline kills it).
	switch {
	case r.Limit == LimitMemory:
		return OutcomeMemoryLimit
	case r.Limit == LimitProcesses:
		return OutcomeProcessLimit
	case r.Limit == LimitFileSize:
		return OutcomeFileSizeLimit
	case r.Limit == LimitDisk:
		return OutcomeDiskLimit
	case r.TimedOut:
		return OutcomeTimeout
	case r.Limit == LimitOutput, r.StdoutTruncated, r.StderrTruncated:
		return OutcomeOutputLimit
	case r.ExitCode == 0:
		return OutcomeOK
	}
	out := r.Stdout + "\n" + r.Stderr
	switch {
	case strings.Contains(r.Stderr, "runtime: out of memory"), strings.Contains(r.Stderr, "cannot allocate memory"):
		return OutcomeMemoryLimit
	case strings.Contains(out, "resource temporarily unavailable") && (strings.Contains(out, "fork") || strings.Contains(out, "thread")),
		strings.Contains(out, "failed to create new OS thread"),
		strings.Contains(out, "pthread_create failed"):
		return OutcomeProcessLimit
	case FileSizeLimitHit(r):
		return OutcomeFileSizeLimit
	case !r.DiskCounted && strings.Contains(strings.ToLower(out), "no space left on device"):
		return OutcomeDiskLimit
	}
	// go run's "exit status N" trailer means the program built and ran: its
	// own output may look like a compiler's or go test's.
	if usesGoTool(command) && !goRunExitRE.MatchString(r.Stderr) {
		switch {
		case strings.Contains(out, "[build failed]"), strings.Contains(out, "[setup failed]"):
			return OutcomeBuildFailed
		case testFailRE.MatchString(r.Stdout) && (strings.Contains(command, "test") || !panicRE.MatchString(out)):
			// A FAIL line is go test's verdict; outside go test it counts
			// only when the program did not panic.
			return OutcomeTestFailed
		case panicRE.MatchString(r.Stderr):
			return OutcomePanic
		case compileErrRE.MatchString(r.Stderr), goToolErrRE.MatchString(r.Stderr), strings.Contains(r.Stderr, "\n# ") || strings.HasPrefix(r.Stderr, "# "),
			soleGoCommand(command) && compileErrNoColRE.MatchString(r.Stderr):
			return OutcomeBuildFailed
		}
	}
	if panicRE.MatchString(r.Stderr) {
		return OutcomePanic
	}
	return OutcomeRuntimeError
}

// FileSizeLimitHit reports whether r says its command ran into the
// sandbox's file size limit (RLIMIT_FSIZE): SIGXFSZ ended it (exit
// status 128+SIGXFSZ, 153), or either stream holds what a command prints
// when it ran into the limit without dying of SIGXFSZ itself: a shell's
// report of a child the signal ended ("File size limit exceeded",
// strsignal(SIGXFSZ)) or EFBIG's message ("file too large", e.g. a Go
// program's "write big: file too large"). The command's own exit status
// does not matter: `head -c 2G /dev/zero > big; echo $?` exits 0.
//
// Text and exit status are the only signs: the kernel counts no
// RLIMIT_FSIZE hit anywhere (unlike the cgroup's OOM and pids events),
// and a file at the limit's size proves nothing (truncate makes one). A
// command can print the text or exit 153
// to forge the label; all it gains is a wrong label on its own result.
// Classify takes it for a command that failed; a backend may label any
// command with it (the local backend does).
func FileSizeLimitHit(r *ExecResult) bool {
	if r.ExitCode == wire.SignalExitCode(int(syscall.SIGXFSZ)) {
		return true
	}
	for _, m := range []string{"File size limit exceeded", "file too large"} {
		if strings.Contains(r.Stderr, m) || strings.Contains(r.Stdout, m) {
			return true
		}
	}
	return false
}

// soleGoCommand reports whether command is one go command and nothing
// else (no list, pipeline, substitution or redirection), so that what it
// printed is the go tool's or, under go run, followed by its "exit
// status" trailer.
func soleGoCommand(command string) bool {
	c := strings.TrimSpace(command)
	return strings.HasPrefix(c, "go ") && !strings.ContainsAny(c, ";&|`$()<>\n")
}

// usesGoTool reports whether command invokes the go command.
func usesGoTool(command string) bool {
	for _, f := range strings.FieldsFunc(command, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == ';' || r == '&' || r == '|' || r == '('
	}) {
		if f == "go" || strings.HasSuffix(f, "/go") {
			return true
		}
	}
	return false
}
