package pathsafe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture builds a base directory with the symlinks an earlier command
// could plant, next to a directory that must stay unreachable.
func fixture(t testing.TB) (*Root, string) {
	t.Helper()
	top := t.TempDir()
	base := filepath.Join(top, "base")
	outside := filepath.Join(top, "outside")
	for _, d := range []string{base + "/d/e", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{base + "/d/f": "f", outside + "/secret": "s"}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"in":        "d",
		"in2":       "./d/e/..",
		"absin":     base + "/d",
		"out":       "../outside",
		"absout":    outside,
		"up":        "d/../..",
		"loop":      "loop",
		"chain":     "in",
		"d/e/back":  "../../d",
		"d/e/climb": "../../../outside",
		"dangling":  "nowhere/deeper",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, outside
}

func TestResolve(t *testing.T) {
	r, _ := fixture(t)
	ok := map[string]string{
		"":                ".",
		".":               ".",
		"/":               ".",
		"d/f":             "d/f",
		"/d/f":            "d/f",
		"//d//./f":        "d/f",
		"d/e/../f":        "d/f",
		"in/f":            "d/f",
		"in2/f":           "d/f",
		"absin/f":         "d/f",
		"chain/e":         "d/e",
		"d/e/back/f":      "d/f",
		"new/file.txt":    "new/file.txt",
		"new/../x":        "x",
		"dangling":        "nowhere/deeper",
		"d/f/under-file":  "d/f/under-file",
		"in/e/../../d/f":  "d/f", // ".." after a symlink climbs from its target
		"x/../../base/d":  "",    // escape: the first ".." leaves x, the second the base
		"up":              "",
		"out/secret":      "",
		"absout":          "",
		"d/e/climb":       "",
		"../base/d":       "",
		"..":              "",
		"d/../..":         "",
		"in/../../x":      "",
		"new/../../x":     "",
		"d/e/back/../../": "",
	}
	for name, want := range ok {
		got, err := r.Resolve(name)
		if want == "" {
			if !errors.Is(err, ErrEscape) {
				t.Errorf("Resolve(%q) = %q, %v; want ErrEscape", name, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := r.Resolve("loop/x"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Resolve(loop/x) error %v, want ELOOP", err)
	}
	if _, err := r.Resolve("a\x00b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve with NUL error %v, want ErrInvalid", err)
	}
}

// FuzzResolve checks, for any name, that a resolved name is local, holds
// no symlink, and — when it exists — really lies inside the base.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"d/f", "../x", "in/../..", "up/outside/secret", "absin/../f", "%2e%2e", "d/e/back/e/climb", "/../d", "loop", "chain/e/../f"} {
		f.Add(s)
	}
	r, outside := fixture(f)
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := r.Resolve(name)
		if err != nil {
			return
		}
		if rel != "." && !filepath.IsLocal(rel) {
			t.Fatalf("Resolve(%q) = %q: not local", name, rel)
		}
		if strings.Contains("/"+rel+"/", "/../") {
			t.Fatalf("Resolve(%q) = %q holds ..", name, rel)
		}
		full := filepath.Join(r.Dir(), rel)
		real, err := filepath.EvalSymlinks(full)
		if err != nil {
			return // does not exist (yet)
		}
		if real != full {
			t.Fatalf("Resolve(%q) = %q, which still goes through a symlink to %s", name, rel, real)
		}
		if real != r.Dir() && !strings.HasPrefix(real, r.Dir()+"/") || strings.HasPrefix(real, outside) {
			t.Fatalf("Resolve(%q) = %q reaches %s outside the base", name, rel, real)
		}
		if _, err := r.OS().Stat(rel); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("os.Root refuses Resolve(%q) = %q: %v", name, rel, err)
		}
	})
}
