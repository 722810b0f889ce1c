// Package tree removes directory trees the local backend made, including
// ones whose directories were made read-only (a sandbox's module cache, a
// sealed seed build cache).
package tree

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Remove deletes dir, making read-only directories (which a sandbox may
// leave, e.g. a module cache) writable first when needed.
func Remove(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
