package hostuid

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Chown gives the directories and the regular files with a single link
// under root to uid/gid. Files with more links are the seed build cache's
// shared, read-only hard links (owned by nobody), which stay as they are.
func Chown(root string, uid int) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				return nil
			}
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		return fmt.Errorf("give %s to uid %d: %w", root, uid, err)
	}
	return nil
}
