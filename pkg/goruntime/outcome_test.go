package goruntime

import "testing"

// TestClassify feeds Classify outputs the go command and Go programs
// really print (taken from the conformance corpus in pkg/goruntime/corpus).
func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		command string
		r       ExecResult
		want    Outcome
	}{
		{"ok", "go run .", ExecResult{Stdout: "hi\n"}, OutcomeOK},
		{"disk limit reported", "head -c 1G /dev/zero > big", ExecResult{ExitCode: 0, Limit: LimitDisk}, OutcomeDiskLimit},
		{"enospc", "go run .", ExecResult{ExitCode: 1,
			Stderr: "panic: write big: no space left on device\n\ngoroutine 1 [running]:\n"}, OutcomeDiskLimit},
		// The backend counted: the disk was not full, so ENOSPC came from
		// elsewhere (no pty left) or the command printed it.
		{"enospc, disk not full", "go run .", ExecResult{ExitCode: 1, DiskCounted: true,
			Stderr: "open /dev/ptmx: no space left on device\n"}, OutcomeRuntimeError},
		{"compile error", "go run .", ExecResult{ExitCode: 1,
			Stderr: "# example.com/x\n./main.go:11:1: missing return\n./main.go:15:27: undefined: totl\n"}, OutcomeBuildFailed},
		{"syntax error", "go build ./...", ExecResult{ExitCode: 1,
			Stderr: "# example.com/x\n./main.go:10:1: syntax error: unexpected EOF, expected }\n"}, OutcomeBuildFailed},
		// A //line directive leaves no column, and a syntax error found
		// while loading has no "# pkg" header (GOROOT/test/fixedbugs/issue18393.go).
		{"syntax error under a //line directive", "go run issue18393.go", ExecResult{ExitCode: 1,
			Stderr: "issue18393.go:20: import path must be a string\n"}, OutcomeBuildFailed},
		{"vet finding", "go vet .", ExecResult{ExitCode: 1,
			Stderr: "main.go:19:20: fmt.Printf format %d has arg name of wrong type string\n"}, OutcomeBuildFailed},
		{"unknown module", "go run .", ExecResult{ExitCode: 1,
			Stderr: "go: finding module for package example.com/nope\nmain.go:7:2: cannot find module providing package example.com/nope: module lookup disabled by GOPROXY=off\n"}, OutcomeBuildFailed},
		{"no go.mod", "go run .", ExecResult{ExitCode: 1,
			Stderr: "go: go.mod file not found in current directory or any parent directory; see 'go help modules'\n"}, OutcomeBuildFailed},
		{"test build failed", "go test .", ExecResult{ExitCode: 1,
			Stdout: "FAIL\texample.com/x [build failed]\nFAIL\n",
			Stderr: "# example.com/x [example.com/x.test]\n./x_test.go:6:19: undefined: Sub\n"}, OutcomeBuildFailed},
		{"test failed", "go test .", ExecResult{ExitCode: 1,
			Stdout: "--- FAIL: TestMedian (0.00s)\n    stats_test.go:19: Median = 3, want 2.5\nFAIL\nFAIL\texample.com/x\t0.003s\nFAIL\n"}, OutcomeTestFailed},
		{"test panicked", "go test .", ExecResult{ExitCode: 1,
			Stdout: "--- FAIL: TestZero (0.00s)\npanic: runtime error: index out of range [0] with length 0\n\ngoroutine 5 [running]:\nFAIL\texample.com/x\t0.004s\nFAIL\n"}, OutcomeTestFailed},
		{"panic under go run", "go run .", ExecResult{ExitCode: 1,
			Stderr: "panic: ledger is corrupt\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:25 +0x125\nexit status 2\n"}, OutcomePanic},
		{"deadlock", "go run .", ExecResult{ExitCode: 1,
			Stderr: "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [chan send]:\nexit status 2\n"}, OutcomePanic},
		{"panic in a binary", "go build -o app . && ./app", ExecResult{ExitCode: 2,
			Stderr: "panic: unreachable\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:13 +0x1dc\n"}, OutcomePanic},
		{"os.Exit under go run", "go run .", ExecResult{ExitCode: 1, Stderr: "config: missing key\nexit status 3\n"}, OutcomeRuntimeError},
		{"os.Exit in a binary", "./app", ExecResult{ExitCode: 3}, OutcomeRuntimeError},
		{"timeout", "go run .", ExecResult{ExitCode: 124, TimedOut: true, Stdout: "started\n"}, OutcomeTimeout},
		{"killed by a signal", "go build -o app . && ./app", ExecResult{ExitCode: 137, Stderr: "Killed\n"}, OutcomeRuntimeError},

		// A program's own output that looks like the go tool's: it built and
		// ran, so these are runtime errors.
		{"log.Lshortfile under go run", "go run .", ExecResult{ExitCode: 1,
			Stderr: "main.go:22: load: no such file or directory\nmain.go:23: cannot continue without settings\nexit status 1\n"}, OutcomeRuntimeError},
		{"log.Lshortfile in a binary", "go build -o app . && ./app", ExecResult{ExitCode: 1,
			Stderr: "main.go:22: load: no such file or directory\n"}, OutcomeRuntimeError},
		{"log.Lshortfile after a go command", "go build -o app . && ./app > out.txt", ExecResult{ExitCode: 1,
			Stderr: "main.go:22: load: no such file or directory\n"}, OutcomeRuntimeError},
		{"compiler-like findings under go run", "go run .", ExecResult{ExitCode: 1, Stdout: "FAIL: 2 findings\n",
			Stderr: "# Findings\nhandlers.go:12:5: error returned by Close is ignored\nexit status 1\n"}, OutcomeRuntimeError},
		{"panic output of a program under go run still a panic", "go run .", ExecResult{ExitCode: 1,
			Stderr: "# report\npanic: boom\n\ngoroutine 1 [running]:\nexit status 2\n"}, OutcomePanic},
	}
	for _, tt := range tests {
		if got := Classify(tt.command, &tt.r); got != tt.want {
			t.Errorf("%s: Classify(%q) = %s, want %s", tt.name, tt.command, got, tt.want)
		}
	}
}
