package seed

import (
	"os"
	"path/filepath"
	"strings"
)

// The extra seed: the base seed build cache plus what go test -cover, go
// tool test2json and, when the host has a C compiler under /usr, go test
// -race compile (the race-instrumented runtime and the packages most tests
// import, built with CGO_ENABLED=1). It is built in the background after
// the base seed (Builder), so it never delays a first Open; once complete,
// new sandboxes' build caches are linked from it instead of the base
// (Populate, WithExtra), and their first go test -race or -cover compiles
// only the user's code. It lives beside the base as
// seed/<key>-extra-v2-race or seed/<key>-extra-v2.

// extraSuffix names the extra seed after the base seed's directory.
func extraSuffix() string {
	if raceCapable() {
		return "-extra-v2-race"
	}
	return "-extra-v2"
}

// WithExtra returns the extra seed of base when it is complete, else base.
func WithExtra(base string) string {
	extra := base + extraSuffix()
	if _, err := os.Stat(filepath.Join(extra, ".complete")); err == nil {
		return extra
	}
	return base
}

// Claimable reports whether caches linked from the seed directory named
// name in root (spare build caches, spare disks) are still claimed: it is
// complete, and it is what WithExtra picks for its base seed (the current
// extra seed once that is complete, else the base).
func Claimable(root, name string) bool {
	if name == "" || name != filepath.Base(name) {
		return false
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return false
	}
	base := strings.TrimSuffix(name, extraSuffix())
	if base != name {
		return true // the current kind of extra seed, complete
	}
	if strings.Contains(name, "-extra-") {
		return false // an extra seed of an older kind
	}
	return WithExtra(dir) == dir
}
