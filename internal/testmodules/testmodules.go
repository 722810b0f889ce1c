// Package testmodules lays out Go modules as a GOPROXY=file:// directory
// serves them (<module>/@v/list, <version>.info, .mod, .zip), for tests
// that need modules without a network: an upstream for the module proxy
// (cmd/modproxy's tests, the e2e's in-cluster proxy).
package testmodules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// Write adds mod@version to the file proxy at root: a go.mod ("module
// mod", go 1.22) and files (name -> content, slash-separated names), with
// version's time fixed. It appends to @v/list. Directories it creates are
// 0755 and files 0644, readable by another uid (a pod's).
func Write(root, mod, version string, files map[string]string) error {
	if err := module.Check(mod, version); err != nil {
		return fmt.Errorf("module %s@%s: %w", mod, version, err)
	}
	src, err := os.MkdirTemp("", "testmodule-")
	if err != nil {
		return fmt.Errorf("module source: %w", err)
	}
	defer os.RemoveAll(src)
	gomod := "module " + mod + "\n\ngo 1.22\n"
	all := map[string]string{"go.mod": gomod}
	for name, body := range files {
		all[name] = body
	}
	for name, body := range all {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("module source: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("module source: %w", err)
		}
	}
	var zb bytes.Buffer
	if err := modzip.CreateFromDir(&zb, module.Version{Path: mod, Version: version}, src); err != nil {
		return fmt.Errorf("zip %s@%s: %w", mod, version, err)
	}
	escaped, err := module.EscapePath(mod)
	if err != nil {
		return fmt.Errorf("module %s: %w", mod, err)
	}
	dir := filepath.Join(root, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file proxy: %w", err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		return err
	}
	for name, body := range map[string][]byte{version + ".info": info, version + ".mod": []byte(gomod), version + ".zip": zb.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return fmt.Errorf("file proxy: %w", err)
		}
	}
	list, err := os.ReadFile(filepath.Join(dir, "list"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("file proxy: %w", err)
	}
	if !strings.Contains("\n"+string(list), "\n"+version+"\n") {
		list = append(list, version+"\n"...)
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), list, 0o644); err != nil {
		return fmt.Errorf("file proxy: %w", err)
	}
	// Readable by another uid all the way down.
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o755)
	})
}
