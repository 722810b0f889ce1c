package gotool

import (
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Source names the tool a Diagnostic came from.
type Source string

const (
	// SourceCompile: the compiler or type checker (go build, go run, go
	// test's build step, type errors go vet reports), the go command's
	// own errors (missing modules, bad go.mod) and cgo's C compiler.
	SourceCompile Source = "compile"
	// SourceVet: a go vet analyzer's finding (go vet, or the vet step of
	// go test).
	SourceVet Source = "vet"
	// SourceGofmt: a file gofmt would change, or one gofmt cannot parse.
	SourceGofmt Source = "gofmt"
	// SourceTest: a failing test's t.Error/t.Fatal line.
	SourceTest Source = "test"
)

// Diagnostic is one finding at a position in a file.
type Diagnostic struct {
	// File is relative to the work directory (/app in a sandbox) with "/"
	// separators; absolute for files outside it; empty for findings with
	// no position (e.g. "go: cannot find main module").
	File string `json:"file"`
	// Line and Column are 1-based; 0 when the tool did not say.
	Line   int `json:"line"`
	Column int `json:"column"`
	// Message is the tool's text without the position; continuation lines
	// the tool indents under it (e.g. "have (int)\n\twant (string)") are
	// kept, joined by "\n".
	Message string `json:"message"`
	Source  Source `json:"source"`
}

// String formats d as the go tool does: "file:line:col: message".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			b.WriteString(":" + strconv.Itoa(d.Line))
			if d.Column > 0 {
				b.WriteString(":" + strconv.Itoa(d.Column))
			}
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

var (
	// file.go:12:3: message, file.go:12: message, and vet's
	// "vet: file.go:12:3: message" for type errors. The extensions are
	// those the go command compiles or reads (Go, cgo's C and C++,
	// assembly, go.mod, go.work).
	posLineRE = regexp.MustCompile(`^(vet: )?((?:[^\s:]|[^\s:][^:\n]*[^\s:])\.(?:go|c|h|cc|cpp|cxx|hh|hpp|m|s|S|sx|f|F|f90|swig|syso|mod|work|sum)):(\d+)(?::(\d+))?: (.*)$`)
	// The go command's own errors before building: "go: …", and
	// "package p: …" for a package it cannot load.
	goErrRE = regexp.MustCompile(`^(?:go: (.*)|(package \S+: .*))$`)
	// Lines the go command prints that are progress, not findings.
	goInfoRE = regexp.MustCompile(`^go: (downloading|finding|found|extracting|added|upgraded|downgraded|removed|to add|warning: "all" matched no packages)`)
)

// vetMessageRE matches the findings of the analyzers go test runs as its
// vet step (atomic, bool, buildtags, directive, errorsas, ifaceassert,
// nilfunc, printf, stringintconv, tests). In go test's output they are
// printed exactly like compile errors; the message is what tells them
// apart.
var vetMessageRE = regexp.MustCompile(`(` +
	`(?:format|call) .*(?:has arg|wrong type|needs|reads arg|possible .*formatting directive|has arguments but no formatting directives|ends with redundant newline|arg list ends with redundant newline)` +
	`|non-constant format string in call to` +
	`|direct assignment to atomic value` +
	`|suspect or: |redundant or: |suspect and: |redundant and: ` +
	`|misplaced \+build comment|misplaced //go:build comment|\+build line|//go:build line|invalid //go:|misplaced //go:debug` +
	`|second argument to errors\.(?:As|Is) must be` +
	`|impossible type assertion` +
	`|comparison of function .* (?:==|!=) nil is always` +
	`|conversion from .* to string yields a string of one rune` +
	`|malformed example suffix|should not have result values|should be niladic|has malformed name|refers to unknown (?:identifier|field or method)` +
	`|call to \(\*testing\.[BT]\)\.\w+ from a non-test goroutine` +
	`)`)

// ParseBuildOutput extracts diagnostics from what the go command prints on
// stderr when a build, vet or gofmt fails: "# pkg" headers, then
// "file:line:col: message" lines with tab-indented continuations. src is
// the tool that ran: SourceCompile for go build/run/test, SourceVet for go
// vet (whose "vet: "-prefixed type errors are reported as SourceCompile),
// SourceGofmt for gofmt. With SourceCompile, findings of go test's vet
// step are recognised by their message and reported as SourceVet.
//
// workDir is the directory the command ran in (e.g. "/app"); paths are
// made relative to it. Lines that are not findings (program output,
// "exit status 1", "too many errors") are skipped. Duplicates (go test
// and go vet can report one error twice) are dropped.
func ParseBuildOutput(out string, src Source, workDir string) []Diagnostic {
	var (
		diags []Diagnostic
		last  = -1 // index in diags of the finding continuation lines belong to
		seen  = map[Diagnostic]bool{}
	)
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "\t") {
			if last >= 0 {
				diags[last].Message += "\n" + line
			}
			continue
		}
		last = -1
		if m := posLineRE.FindStringSubmatch(line); m != nil {
			d := Diagnostic{File: RelPath(m[2], workDir), Message: m[5], Source: src}
			d.Line, _ = strconv.Atoi(m[3])
			d.Column, _ = strconv.Atoi(m[4])
			switch {
			case m[1] != "":
				d.Source = SourceCompile // go vet's report of a type error
			case src == SourceCompile && vetMessageRE.MatchString(d.Message):
				d.Source = SourceVet
			}
			diags = append(diags, d)
			last = len(diags) - 1
			continue
		}
		if goInfoRE.MatchString(line) {
			continue
		}
		if m := goErrRE.FindStringSubmatch(line); m != nil {
			diags = append(diags, Diagnostic{Message: m[1] + m[2], Source: SourceCompile})
			last = len(diags) - 1
		}
	}
	// Drop duplicates after continuations are attached.
	out2 := diags[:0]
	for _, d := range diags {
		if seen[d] {
			continue
		}
		seen[d] = true
		out2 = append(out2, d)
	}
	return out2
}

// RelPath makes p, a path as the go command printed it, relative to
// workDir (the command's working directory, absolute): "./x.go" and
// "/app/x.go" become "x.go" for workDir "/app". Absolute paths outside
// workDir are returned cleaned; relative paths stay relative to workDir
// ("../x.go" stays "../x.go").
func RelPath(p, workDir string) string {
	if p == "" {
		return ""
	}
	if path.IsAbs(p) {
		p = path.Clean(p)
		wd := path.Clean(workDir)
		if workDir != "" && (p == wd || strings.HasPrefix(p, wd+"/")) {
			if p == wd {
				return "."
			}
			return strings.TrimPrefix(p, wd+"/")
		}
		return p
	}
	return path.Clean(p)
}

// Sort-friendly comparison for callers that merge diagnostics of several
// tools: by file, line, column, then source.
func Less(a, b Diagnostic) bool {
	if a.File != b.File {
		return a.File < b.File
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Column != b.Column {
		return a.Column < b.Column
	}
	return a.Source < b.Source
}
