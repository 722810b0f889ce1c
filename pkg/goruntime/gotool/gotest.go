package gotool

import (
	"regexp"
	"strings"
)

// PackageOutput is the part of go test's text output that belongs to one
// package: the test binary's output followed by go test's summary line.
type PackageOutput struct {
	Package string
	Text    string
}

// summaryRE is go test's per-package summary line: "ok  \tpkg\t0.01s…",
// "FAIL\tpkg\t0.01s", "FAIL\tpkg [build failed]", "?   \tpkg\t[no test files]".
var summaryRE = regexp.MustCompile(`^(?:ok  |FAIL|\?   )\t(\S+)(?:\t| \[|$)`)

// SplitTestOutput cuts the text go test printed on stdout (not in JSON
// mode) into one piece per package, each ending with its summary line, so
// each can be fed to `go tool test2json -p <package>`. go test prints a
// package's output in one block even when packages are tested in
// parallel. Text after the last summary line (go test's closing "FAIL")
// belongs to no package and is dropped.
func SplitTestOutput(stdout string) []PackageOutput {
	var (
		out   []PackageOutput
		start int
	)
	for pos := 0; pos < len(stdout); {
		end := strings.IndexByte(stdout[pos:], '\n')
		next := len(stdout)
		if end >= 0 {
			next = pos + end + 1
		}
		line := strings.TrimRight(stdout[pos:next], "\n")
		if m := summaryRE.FindStringSubmatch(line); m != nil {
			out = append(out, PackageOutput{Package: m[1], Text: stdout[start:next]})
			start = next
		}
		pos = next
	}
	return out
}

// goTestRE finds a go test invocation in a shell command line: "go" (or a
// path ending in /go) then "test" as words.
var goTestRE = regexp.MustCompile(`(?:^|[\s;&|(])(?:\S*/)?go\s+test(?:\s|$)`)

// IsGoTest reports whether command runs `go test`.
func IsGoTest(command string) bool {
	return goTestRE.MatchString(command)
}

// LooksLikeTestEvents reports whether out begins with a go test JSON
// event (the command passed -json).
func LooksLikeTestEvents(out string) bool {
	s := strings.TrimLeft(out, " \t\r\n")
	return strings.HasPrefix(s, `{"`) && strings.Contains(s[:min(len(s), 200)], `"Action":`)
}
