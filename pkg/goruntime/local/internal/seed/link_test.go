package seed

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPopulateKeepsModes: a sandbox's build cache made from the seed keeps
// the executables' modes, linked (root) or copied (any other user): go test
// -json runs test2json from the cache, and a copy without its x bit failed
// with "fork/exec .../test2json: permission denied".
func TestPopulateKeepsModes(t *testing.T) {
	seed, dst := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(filepath.Join(seed, "2b"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]os.FileMode{"2b/tool-d": 0o755, "2b/object-d": 0o644}
	for name, mode := range files {
		if err := os.WriteFile(filepath.Join(seed, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := Populate(seed, dst); err != nil {
		t.Fatal(err)
	}
	for name, mode := range files {
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v in the sandbox's cache, %v in the seed", name, fi.Mode().Perm(), mode)
		}
	}
}
