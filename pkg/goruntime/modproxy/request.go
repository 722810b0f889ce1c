package modproxy

// Parsing a GOPROXY request path into what it asks for.

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/mod/module"
)

// kind is what a request asks for.
type kind int

const (
	kindList kind = iota
	kindLatest
	kindInfo
	kindMod
	kindZip
)

// request is a parsed proxy request.
type request struct {
	mod     string // module path, unescaped
	kind    kind
	version string // unescaped; canonical for .mod and .zip
}

// parseRequest parses a GOPROXY request path (escaped, as the go command
// sends it). Module paths and versions are unescaped and checked by
// golang.org/x/mod/module, which refuses "..", empty elements and the
// like, so a request can only name a file under cache/download that
// belongs to the module it names.
func parseRequest(p string) (request, error) {
	if len(p) > maxPathBytes {
		return request{}, fmt.Errorf("request path longer than %d bytes", maxPathBytes)
	}
	p, ok := strings.CutPrefix(p, "/")
	if !ok {
		return request{}, errors.New("request path does not start with /")
	}
	var r request
	escMod, rest, ok := strings.Cut(p, "/@v/")
	if !ok {
		if escMod, ok = strings.CutSuffix(p, "/@latest"); !ok {
			return request{}, errors.New("not a module proxy path (want <module>/@v/... or <module>/@latest)")
		}
		r.kind = kindLatest
	}
	mod, err := module.UnescapePath(escMod)
	if err != nil {
		return request{}, err
	}
	r.mod = mod
	if r.kind == kindLatest {
		return r, nil
	}
	if rest == "list" {
		r.kind = kindList
		return r, nil
	}
	if strings.Contains(rest, "/") {
		return request{}, fmt.Errorf("not a module proxy path: %q after /@v/", rest)
	}
	ext := path.Ext(rest)
	switch ext {
	case ".info":
		r.kind = kindInfo
	case ".mod":
		r.kind = kindMod
	case ".zip":
		r.kind = kindZip
	default:
		return request{}, fmt.Errorf("not a module proxy path: %q after /@v/ (want list, <version>.info, .mod or .zip)", rest)
	}
	v, err := module.UnescapeVersion(strings.TrimSuffix(rest, ext))
	if err != nil {
		return request{}, err
	}
	r.version = v
	if r.kind == kindInfo && !isCanonical(v) {
		// A query (branch, commit, version prefix) the go command resolves
		// through .info; checked like a version, minus canonical form.
		if !validQuery(v) {
			return request{}, fmt.Errorf("bad version query %q", v)
		}
		return r, nil
	}
	if err := module.Check(mod, v); err != nil {
		return request{}, err
	}
	if !isCanonical(v) {
		return request{}, fmt.Errorf("version %q is not canonical (%q)", v, module.CanonicalVersion(v))
	}
	return r, nil
}

// isCanonical reports whether v is a version as a proxy stores it
// (semver in canonical form, +incompatible kept).
func isCanonical(v string) bool { return v != "" && module.CanonicalVersion(v) == v }

// validQuery reports whether q may be passed on as a version query: a
// tag, branch, commit or version prefix of letters, digits and ._+~-,
// not starting with "-" and without "..".
func validQuery(q string) bool {
	if q == "" || len(q) > 256 || strings.HasPrefix(q, "-") || strings.Contains(q, "..") {
		return false
	}
	for _, c := range q {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("._+~-", c)) {
			return false
		}
	}
	return true
}
