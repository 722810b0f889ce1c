package playground

import (
	"fmt"
	"strings"
)

// A module travels between the page and the server as txtar text, as on
// go.dev/play: lines "-- name --" start a file; text before the first
// such line is the file prog.go (the page's single-file programs).

// defaultFile is the name of text before the first file marker.
const defaultFile = "prog.go"

// textFile is one file of a txtar text.
type textFile struct {
	Name string
	Data string
}

// parseTxtar splits text into files. A name given twice, an empty name
// or a text with no file at all is an error naming it.
func parseTxtar(text string) ([]textFile, error) {
	var files []textFile
	seen := map[string]bool{}
	var cur *textFile
	var b strings.Builder
	flush := func() {
		if cur != nil {
			cur.Data = b.String()
			files = append(files, *cur)
		}
		b.Reset()
	}
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		if name, ok := marker(line); ok {
			flush()
			if name == "" {
				return nil, fmt.Errorf("line %d: a file marker with no name (want \"-- name.go --\")", i+1)
			}
			if seen[name] {
				return nil, fmt.Errorf("line %d: file %s given twice", i+1, name)
			}
			seen[name] = true
			cur = &textFile{Name: name}
			continue
		}
		if cur == nil {
			if strings.TrimSpace(line) == "" && b.Len() == 0 {
				continue
			}
			cur = &textFile{Name: defaultFile}
			seen[defaultFile] = true
		}
		b.WriteString(line)
	}
	flush()
	if len(files) == 0 {
		return nil, fmt.Errorf("no files: the text is empty")
	}
	return files, nil
}

// marker returns the name of a "-- name --" line.
func marker(line string) (string, bool) {
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "-- ") || !strings.HasSuffix(line, " --") || len(line) < 6 {
		return "", false
	}
	return strings.TrimSpace(line[3 : len(line)-3]), true
}

// formatTxtar joins files back into txtar text; a lone prog.go is written
// without its marker.
func formatTxtar(files []textFile) string {
	if len(files) == 1 && files[0].Name == defaultFile {
		return files[0].Data
	}
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "-- %s --\n", f.Name)
		b.WriteString(f.Data)
		if f.Data != "" && !strings.HasSuffix(f.Data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
