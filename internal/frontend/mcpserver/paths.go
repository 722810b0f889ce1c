package mcpserver

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

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

// toolFiles turns a tool's files argument (path to content) into the
// files of a goruntime request, in path order. It checks nothing: the
// Session checks the paths before it writes any (goruntime.ValidateFiles).
func toolFiles(m map[string]string) []goruntime.File {
	files := make([]goruntime.File, 0, len(m))
	for p, c := range m {
		files = append(files, goruntime.File{Path: p, Data: []byte(c)})
	}
	slices.SortFunc(files, func(a, b goruntime.File) int { return strings.Compare(a.Path, b.Path) })
	return files
}
