package mcpserver

import (
	"errors"
	"fmt"
	"path"
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
