package gotool

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	// gofmt -d prints, per file it would change, "diff -u <file>.orig
	// <file>" (the command it mimics), then "--- <file>.orig", "+++ <file>"
	// and hunks.
	gofmtFileRE = regexp.MustCompile(`^\+\+\+ (\S+)`)
	hunkRE      = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)
)

// ParseGofmtDiff turns the unified diff `gofmt -d` prints into one
// SourceGofmt diagnostic per hunk, at the first line gofmt would change
// (line numbers of the file as it is), saying what to run. workDir is the
// directory gofmt ran in.
func ParseGofmtDiff(diff, workDir string) []Diagnostic {
	var (
		diags   []Diagnostic
		file    string
		oldLine int  // line number in the original of the next hunk line
		pending bool // inside a hunk whose first change is not seen yet
	)
	for _, line := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "diff "), strings.HasPrefix(line, "--- "):
			pending = false
			continue
		case strings.HasPrefix(line, "+++ "):
			if m := gofmtFileRE.FindStringSubmatch(line); m != nil {
				file = RelPath(m[1], workDir)
			}
			pending = false
			continue
		}
		if m := hunkRE.FindStringSubmatch(line); m != nil {
			oldLine, _ = strconv.Atoi(m[1])
			pending = true
			continue
		}
		if !pending || line == "" {
			continue
		}
		switch line[0] {
		case ' ':
			oldLine++
		case '-', '+':
			diags = append(diags, Diagnostic{
				File:    file,
				Line:    max(oldLine, 1),
				Column:  1,
				Message: "not formatted as gofmt formats it (run gofmt -w " + file + ")",
				Source:  SourceGofmt,
			})
			pending = false
		}
	}
	return diags
}
