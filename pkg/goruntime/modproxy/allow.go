package modproxy

import (
	"fmt"
	"path"
	"strings"

	"golang.org/x/mod/module"
)

// ValidatePatterns checks allowlist patterns: each is a module path
// pattern as GOPRIVATE takes them (module.MatchPrefixPatterns): path
// elements that may hold path.Match globs, matching a module path that has
// them as a prefix (so "github.com/foo/*" allows github.com/foo/bar and
// everything under it, and "golang.org/x/text" allows that module and its
// packages). Errors name the bad pattern.
func ValidatePatterns(patterns []string) error {
	for _, p := range patterns {
		switch {
		case strings.TrimSpace(p) != p || p == "":
			return fmt.Errorf("module pattern %q: empty or surrounded by spaces", p)
		case strings.Contains(p, ","):
			return fmt.Errorf("module pattern %q: holds a comma (give patterns as separate values)", p)
		case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//"):
			return fmt.Errorf("module pattern %q: empty path element", p)
		}
		for _, elem := range strings.Split(p, "/") {
			if elem == "." || elem == ".." {
				return fmt.Errorf("module pattern %q: path element %q", p, elem)
			}
			if _, err := path.Match(elem, ""); err != nil {
				return fmt.Errorf("module pattern %q: element %q is not a valid glob: %w", p, elem, err)
			}
		}
	}
	return nil
}

// Allowed reports whether modulePath matches one of patterns.
func Allowed(patterns []string, modulePath string) bool {
	if len(patterns) == 0 {
		return false
	}
	return module.MatchPrefixPatterns(strings.Join(patterns, ","), modulePath)
}

// SuggestPattern returns a pattern that allows the module a path the go
// command asked for (a module path or, while it searches an import path's
// prefixes, a package path) most likely belongs to: the repository root on
// the hosts whose module paths are host/owner/repo, the first two elements
// elsewhere (k8s.io/client-go, rsc.io/quote, gopkg.in/yaml.v3).
func SuggestPattern(p string) string {
	elems := strings.Split(p, "/")
	n := 2
	switch elems[0] {
	case "github.com", "gitlab.com", "bitbucket.org", "golang.org", "codeberg.org":
		n = 3
	}
	if len(elems) < n {
		return p
	}
	return strings.Join(elems[:n], "/")
}
