package disk

import (
	"os"
	"path/filepath"
	"testing"
)

// The shared layer of the build cache's subdirectories is made root's
// and closed to others, its subdirectories writable by any uid, and one
// that is open to others is refused rather than shown in sandboxes.
func TestCacheDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the layer is root's")
	}
	dir := filepath.Join(t.TempDir(), "cachedirs")
	for range 2 { // made, then found
		if err := cacheDirs(dir); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the layer: %v, %v; want mode 0700", fi.Mode(), err)
	}
	for _, sub := range []string{"00", "7f", "ff"} {
		fi, err := os.Stat(filepath.Join(dir, sub))
		if err != nil || fi.Mode().Perm() != 0o777 || !fi.IsDir() {
			t.Fatalf("subdirectory %s: %v, %v; want a directory of mode 0777", sub, fi, err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cacheDirs(dir); err == nil {
		t.Fatal("a layer open to other uids was taken")
	}
	planted := filepath.Join(t.TempDir(), "planted")
	if err := os.Symlink(t.TempDir(), planted); err != nil {
		t.Fatal(err)
	}
	if err := cacheDirs(planted); err == nil {
		t.Fatal("a symlink was taken for the layer")
	}
}
