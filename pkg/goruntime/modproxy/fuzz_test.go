package modproxy

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
)

// FuzzParseRequest: whatever the path, a request that parses names a
// valid module path, and the file it can be served from (escaped path,
// /@v/, escaped version) stays under cache/download.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"/golang.org/x/text/@v/list", "/golang.org/x/text/@latest", "/github.com/!burnt!sushi/toml/@v/v1.3.2.zip",
		"/golang.org/x/text/@v/v0.3.0.info", "/golang.org/x/text/@v/master.info", "/a/../b/@v/list",
		"/golang.org/x/text/@v/../../x.mod", "/example.com/incompat/@v/v2.0.0+incompatible.mod",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := parseRequest(p)
		if err != nil {
			return
		}
		if err := module.CheckPath(r.mod); err != nil {
			t.Fatalf("%q parsed to an invalid module path %q: %v", p, r.mod, err)
		}
		esc, err := module.EscapePath(r.mod)
		if err != nil {
			t.Fatalf("%q: module %q does not escape: %v", p, r.mod, err)
		}
		if r.kind == kindInfo || r.kind == kindMod || r.kind == kindZip {
			if strings.Contains(r.version, "/") {
				t.Fatalf("%q: version %q holds a slash", p, r.version)
			}
			ev, err := module.EscapeVersion(r.version)
			if err != nil {
				if isCanonical(r.version) {
					t.Fatalf("%q: canonical version %q does not escape: %v", p, r.version, err)
				}
				return
			}
			rel := esc + "/@v/" + ev + ".zip"
			if !filepath.IsLocal(rel) || strings.Contains("/"+rel+"/", "/../") {
				t.Fatalf("%q: serves %q, outside cache/download", p, rel)
			}
			if r.kind != kindInfo && !isCanonical(r.version) {
				t.Fatalf("%q: non-canonical version %q for a file", p, r.version)
			}
		}
	})
}
